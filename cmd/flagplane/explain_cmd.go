package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/flagplane/flagplane/cmd/flagplane/explain"
	"github.com/flagplane/flagplane/workflows/injection"
)

func explainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flagplane explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		namespace, output string
		graph             graphFlags
	)
	fs.StringVar(&namespace, "n", "default", "namespace of the object")
	fs.StringVar(&output, "o", "text", "output format: "+strings.Join(explain.Formats, ", "))
	graph.bind(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: flagplane explain KIND/NAME [-n NAMESPACE] [--kubeconfig FILE | --from-dir DIR] [-o text|json|yaml]

Explains, from the same graph the manager keeps, for a workload
(deployment, statefulset, daemonset): every FeatureFlagSource that applies
to it and why (targetRefs, selector, pod annotation), the flag sets its
flagd serves and by which provider, every reference that does not resolve
and why (missing, or no ReferenceGrant), its sidecar, and the settings one
source lost to another; for a featureflag, featureflagsource or
inprocessconfiguration (ff, ffs, ipc): every workload, Flagd, namespace and
generated ConfigMap it reaches, and the referrers it denies.

Examples:
  flagplane explain deployment/web -n shop
  flagplane explain ff/shop-flags -n shop -o yaml
  flagplane explain deploy/shop-web -n shop --from-dir config/samples

Flags:
`)
		fs.PrintDefaults()
	}
	// The object may come before the flags, as with kubectl.
	var object string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		object, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if object == "" && fs.NArg() == 1 {
		object = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	kind, name, ok := strings.Cut(object, "/")
	if !ok || kind == "" || name == "" {
		return fmt.Errorf("%w: give the object as KIND/NAME, e.g. deployment/web", errUsage)
	}
	if err := graph.check(); err != nil {
		return err
	}
	if !slices.Contains(explain.Formats, output) {
		return fmt.Errorf("%w: unknown -o %q: use one of %s", errUsage, output, strings.Join(explain.Formats, ", "))
	}
	top, err := graph.load(ctx, namespace, stderr)
	if err != nil {
		return err
	}
	report, err := explain.Explain(top.Snapshot(), kind, namespace, name, injection.DefaultOptions())
	if err != nil {
		return err
	}
	return explain.Write(stdout, report, output)
}
