package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/migrate"
	"github.com/flagplane/flagplane/workflows"
)

func newMigrateCmd(kube *kubeFlags) *cobra.Command {
	var (
		apply     bool
		timeout   time.Duration
		managedBy string
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Find what the OpenFeature Operator left, and remove what flagplane replaces",
		Long: `Finds what the OpenFeature Operator left on the cluster — its manager, its
webhook configurations, the ClusterRoleBinding it grows for
kubernetes-provider workloads, its own cluster-wide RBAC, the ConfigMaps it
generated, its flagd-proxy, the pods still running its sidecar, its CRDs —
and says what each means now that flagplane runs. With --apply it removes
what flagplane replaces; run it again after rolling the workloads it lists
until it finds nothing. It needs a cluster administrator's permissions (it
lists pods, ConfigMaps and RBAC in every namespace, whatever -n says).

It tells flagplane's objects from the OpenFeature Operator's by their label
app.kubernetes.io/managed-by: flagplane's is its manager's --managed-by
(chart value managedBy), which it reads from the manager's Deployment. With
open-feature-operator, flagplane takes over in place what the OpenFeature
Operator made for Flagds: none of that is a leftover.`,
		Example: `  flagplane migrate
  flagplane migrate --context prod --apply`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if managedBy != "" {
				if err := (workflows.GeneratedMetadata{ManagedBy: managedBy}).Validate(); err != nil {
					return err
				}
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return unreachable(cfg, runMigrate(ctx, cfg, apply, migrate.Options{ManagedBy: managedBy}, cmd.OutOrStdout()))
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "remove the leftovers marked remove (never what a running pod still uses, never while the OpenFeature Operator is installed)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	cmd.Flags().StringVar(&managedBy, "managed-by", "", "the --managed-by of flagplane's manager (default: read from its Deployment, flagplane-manager; flagplane without one)")
	return cmd
}

func runMigrate(ctx context.Context, cfg *rest.Config, apply bool, opts migrate.Options, stdout io.Writer) error {
	scheme, err := migrate.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	report, err := migrate.Scan(ctx, c, opts)
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
	after, err := migrate.Scan(ctx, c, migrate.Options{ManagedBy: report.ManagedBy})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nNow:")
	after.Write(stdout, true)
	return nil
}
