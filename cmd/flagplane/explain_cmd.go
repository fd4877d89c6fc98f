package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/flagplane/explain"
	"github.com/flagplane/flagplane/cmd/flagplane/topodump"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

func explainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flagplane explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		kubeconfig, kubeContext, fromDir, namespace, output, syncProvider string
		namespaces                                                        stringList
		timeout                                                           time.Duration
	)
	fs.StringVar(&namespace, "n", "default", "namespace of the object")
	fs.StringVar(&output, "o", "text", "output format: "+strings.Join(explain.Formats, ", "))
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of a cluster: the graph is built from its objects with your own permissions")
	fs.StringVar(&kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.Var(&namespaces, "namespaces", "with a cluster: comma-separated namespaces to read (default: all; sources of other namespaces count only if read)")
	fs.StringVar(&fromDir, "from-dir", "", "build the graph offline from the manifests under this folder (no cluster); -n is also the namespace of manifests that name none")
	fs.StringVar(&syncProvider, "sidecar-sync-provider", "", "the manager's --sidecar-sync-provider, if it has one (default file)")
	fs.DurationVar(&timeout, "timeout", time.Minute, "give up reading the graph after this long")
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
	if fromDir != "" && (kubeconfig != "" || len(namespaces) > 0) {
		return fmt.Errorf("%w: --from-dir reads no cluster: leave out --kubeconfig and --namespaces", errUsage)
	}
	if !slices.Contains(explain.Formats, output) {
		return fmt.Errorf("%w: unknown -o %q: use one of %s", errUsage, output, strings.Join(explain.Formats, ", "))
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := []topology.Option{topology.WithDefaultSyncProvider(v1beta1.SyncProviderType(syncProvider))}
	var (
		top *topology.Topology
		err error
	)
	if fromDir != "" {
		top, err = topodump.LoadDir(fromDir, namespace, opts...)
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		cfg, cerr := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
		if cerr != nil {
			return fmt.Errorf("loading kubeconfig: %w", cerr)
		}
		top, err = topodump.LoadCluster(ctx, cfg, topodump.ClusterOptions{Namespaces: namespaces, Warnings: stderr, Topology: opts})
	}
	if err != nil {
		return err
	}
	report, err := explain.Explain(top.Snapshot(), kind, namespace, name, injection.DefaultOptions())
	if err != nil {
		return err
	}
	return explain.Write(stdout, report, output)
}
