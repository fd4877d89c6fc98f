package flagds

import (
	"errors"
	"fmt"

	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/injection"
)

// Options are the operator-wide settings of the Flagd kind, set once
// from the manager's flags (--flagd-image, --flagd-port, ...): the
// OpenFeature Operator's flagdConfiguration. The settings of a Flagd's
// FeatureFlagSource override them where it makes them (a value other than
// the API's default), as they override the sidecar's.
type Options struct {
	// Injection are the options the sidecar is computed with (resources,
	// env var prefix, evaluator, log format, probes, image pull secrets, the
	// sync server and its credentials...): a Flagd's container is the
	// sidecar's, computed by the same code, with the image, ports and debug
	// logging below.
	Injection injection.Options
	// Image and Tag of flagd; the sidecar's where empty.
	Image, Tag string
	// Port, OFREPPort, SyncPort and ManagementPort are the Service's ports
	// for flagd's evaluation, OFREP, sync and management (metrics) APIs,
	// and flagd's own where its source sets none.
	Port, OFREPPort, SyncPort, ManagementPort int32
	// DebugLogging runs flagd with --debug where its source does not say.
	DebugLogging bool
	// Generated are the operator's labels and annotations of generated
	// objects, which a Flagd's objects carry too (the controllers set it
	// from their workflows.Settings).
	Generated workflows.GeneratedMetadata
}

// TagSetting names the setting of Options.Tag in messages.
const TagSetting = "--flagd-tag"

// Flagd is the flagd release a Flagd's Deployment runs: Tag's, else the
// sidecar's.
func (o Options) Flagd() flagdversion.Injected { return o.sidecarOptions().Sidecar.Flagd() }

// Defaults of Options: the OpenFeature Operator's flagdConfiguration.
const (
	DefaultPort           int32 = 8013
	DefaultOFREPPort      int32 = 8016
	DefaultSyncPort       int32 = 8015
	DefaultManagementPort int32 = 8014
)

// DefaultOptions are the Options when no flag is given.
func DefaultOptions() Options {
	return Options{
		Injection:      injection.DefaultOptions(),
		Port:           DefaultPort,
		OFREPPort:      DefaultOFREPPort,
		SyncPort:       DefaultSyncPort,
		ManagementPort: DefaultManagementPort,
	}
}

// Validate reports settings that would make every Flagd's objects invalid.
func (o Options) Validate() error {
	var errs []error
	seen := map[int32]string{}
	for _, port := range []struct {
		name string
		v    int32
	}{{"port", o.Port}, {"OFREP port", o.OFREPPort}, {"sync port", o.SyncPort}, {"management port", o.ManagementPort}} {
		if port.v < 1 || port.v > 65535 {
			errs = append(errs, fmt.Errorf("flagd %s %d is not a port", port.name, port.v))
			continue
		}
		if other, ok := seen[port.v]; ok {
			errs = append(errs, fmt.Errorf("flagd %s and %s are both %d", other, port.name, port.v))
		}
		seen[port.v] = port.name
	}
	return errors.Join(errs...)
}

// sidecarOptions are the sidecar options a Flagd's container is computed with.
func (o Options) sidecarOptions() injection.Options {
	io := o.Injection
	if o.Image != "" {
		io.Sidecar.Image = o.Image
	}
	if o.Tag != "" {
		io.Sidecar.Tag, io.Sidecar.TagSetting = o.Tag, TagSetting
	}
	io.Sidecar.Port = o.Port
	io.Sidecar.ManagementPort = o.ManagementPort
	io.Sidecar.DebugLogging = o.DebugLogging
	return io
}
