package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/cmd/flagplane/migrate"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flagplane migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		kubeconfig, kubeContext string
		apply                   bool
		timeout                 time.Duration
	)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: the current context, as kubectl)")
	fs.StringVar(&kubeContext, "context", "", "kubeconfig context (default: the current one)")
	fs.BoolVar(&apply, "apply", false, "remove the leftovers marked remove (never what a running pod still uses, never while the OpenFeature Operator is installed)")
	fs.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: flagplane migrate [--kubeconfig FILE] [--apply]

Finds what the OpenFeature Operator left on the cluster — its manager, its
webhook configurations, the ClusterRoleBinding it grows for
kubernetes-provider workloads, its own cluster-wide RBAC, the ConfigMaps it
generated, its flagd-proxy, the pods still running its sidecar, its CRDs —
and says what each means now that flagplane runs. With --apply it removes
what flagplane replaces; run it again after rolling the workloads it lists
until it finds nothing. It needs a cluster administrator's permissions (it
lists pods, ConfigMaps and RBAC in every namespace).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	cfg, err := restConfig(kubeconfig, kubeContext)
	if err != nil {
		return err
	}
	scheme, err := migrate.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	report, err := migrate.Scan(ctx, c)
	if err != nil {
		return err
	}
	report.Write(stdout, apply)
	if !apply || len(report.ToRemove()) == 0 {
		return nil
	}
	removed, err := migrate.Apply(ctx, c, report)
	if len(removed) > 0 {
		fmt.Fprintln(stdout, "\nRemoved:")
		for _, r := range removed {
			gone := ""
			if r.Gone {
				gone = " (gone already)"
			}
			fmt.Fprintf(stdout, "  %s%s\n", r.Object, gone)
		}
	}
	if err != nil {
		return err
	}
	after, err := migrate.Scan(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nNow:")
	after.Write(stdout, true)
	return nil
}
