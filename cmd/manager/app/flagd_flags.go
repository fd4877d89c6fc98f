package app

import (
	"flag"
	"fmt"
	"strconv"
)

// bindFlagdFlags binds the settings of the Flagd kind: the OpenFeature
// Operator's flagdConfiguration Helm values, one flag each.
func (o *Options) bindFlagdFlags(fs *flag.FlagSet) {
	f := &o.Flagd
	fs.StringVar(&f.Image, "flagd-image", f.Image, "flagd image of Flagd Deployments, without tag (default: --sidecar-image)")
	fs.StringVar(&f.Tag, "flagd-tag", f.Tag, "tag of --flagd-image (default: --sidecar-tag)")
	fs.Var(port32{&f.Port}, "flagd-port", "Service port of a Flagd's evaluation API, and flagd's where its source sets none")
	fs.Var(port32{&f.OFREPPort}, "flagd-ofrep-port", "Service port of a Flagd's OFREP API, and flagd's where its source sets none")
	fs.Var(port32{&f.SyncPort}, "flagd-sync-port", "Service port of a Flagd's sync API, and flagd's")
	fs.Var(port32{&f.ManagementPort}, "flagd-management-port", "Service port of a Flagd's management API (metrics), and flagd's where its source sets none")
	fs.BoolVar(&f.DebugLogging, "flagd-debug-logging", f.DebugLogging, "run Flagd Deployments with --debug where their source does not say")
}

func (o Options) validateFlagd() []error {
	if err := o.Flagd.Validate(); err != nil {
		return []error{fmt.Errorf("flagd flags: %w", err)}
	}
	return nil
}

// port32 is an int32 flag.
type port32 struct{ p *int32 }

func (f port32) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(int(*f.p))
}

func (f port32) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not a port number", v)
	}
	*f.p = int32(n)
	return nil
}
