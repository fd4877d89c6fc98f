package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/inspect/fleetstatus"
)

var fleetFormats = []string{"text", "json"}

func newFleetCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Where a FeatureFlag of a fleet hub stands on each member cluster",
		Long: `Asks a fleet hub (the kubeconfig's cluster, where flagplane runs with
--fleet-hub) what it knows of the member clusters a FeatureFlag is placed
onto.

  status   for each FeatureFlagPlacement that targets the FeatureFlag, the
           hub's revision and how many selected clusters are current; for
           each cluster its state (Current, Behind, Drifted, Unknown,
           NotGranted, Conflict), the revision its copy holds, how many of
           its pods confirm it, when the hub last heard from it, and why
           it is not current`,
		Example: `  flagplane fleet status ff/checkout -n shop
  flagplane fleet status checkout -n shop -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%w: give a fleet command: status", errUsage)
			}
			return fmt.Errorf("%w: unknown fleet command %q: status", errUsage, args[0])
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(newFleetStatusCmd(kube))
	return cmd
}

func newFleetStatusCmd(kube *kubeFlags) *cobra.Command {
	var (
		output  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status ff/NAME",
		Short: "Each member cluster's state of a FeatureFlag of the hub",
		Long: `Lists the FeatureFlagPlacements of the hub that target the FeatureFlag
(in the namespace of -n, else the context's), each with the hub's
revision of it and "n/m current" over the clusters it selects, and a row
per cluster: CLUSTER, STATE, REVISION (its copy's, 12 digits),
CONFIRMED (pods that serve it, of those that read it), LAST HEARD (since
the hub last heard from the member's API server) and MESSAGE (why it is
not current). -o json gives the same with full revisions, for tools.

Run it against the hub's kubeconfig: the members are the hub's to ask.`,
		Example: `  flagplane fleet status ff/checkout -n shop
  flagplane fleet status checkout -n shop -o json`,
		Args:              fleetFlagSet,
		ValidArgsFunction: completeFlagSets(kube),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := fleetFlagSetName(args[0])
			if err := checkOutput(output, fleetFormats); err != nil {
				return err
			}
			c, ns, reword, err := historyClient(kube)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return reword(runFleetStatus(ctx, c, ns, name, output, cmd.OutOrStdout(), time.Now()))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: "+strings.Join(fleetFormats, ", "))
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(fleetFormats))
	return cmd
}

// fleetFlagSet is the Args of fleet status: one FeatureFlag, as ff/NAME or
// NAME.
func fleetFlagSet(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: give one FeatureFlag as ff/NAME or NAME", errUsage)
	}
	if !strings.Contains(args[0], "/") {
		if args[0] == "" {
			return fmt.Errorf("%w: give one FeatureFlag as ff/NAME or NAME", errUsage)
		}
		return nil
	}
	_, err := flagSetArg(args[0])
	return err
}

// fleetFlagSetName is the name of a FeatureFlag given as ff/NAME or NAME.
func fleetFlagSetName(arg string) string {
	if name, err := flagSetArg(arg); err == nil {
		return name
	}
	return arg
}

// runFleetStatus writes where the FeatureFlag ns/name stands on the fleet,
// from the hub's placements of namespace ns.
func runFleetStatus(ctx context.Context, c client.Reader, ns, name, output string, out io.Writer, now time.Time) error {
	var list fleetv1alpha1.FeatureFlagPlacementList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		if meta.IsNoMatchError(err) {
			return fmt.Errorf("the cluster knows no FeatureFlagPlacement: is the kubeconfig's context the fleet hub's? (%w)", err)
		}
		return fmt.Errorf("listing FeatureFlagPlacements of namespace %s: %w", ns, err)
	}
	r := fleetstatus.New(ns, name, list.Items)
	var policies deliveryv1alpha1.FeatureFlagRolloutPolicyList
	if err := c.List(ctx, &policies, client.InNamespace(ns)); err == nil {
		r.Rollouts = fleetstatus.Rollouts(name, policies.Items)
	}
	if output == "json" {
		return writeAs(out, r, output)
	}
	if len(r.Placements) == 0 {
		return fmt.Errorf("no FeatureFlagPlacement of namespace %s targets FeatureFlag %s: the hub places it nowhere", ns, name)
	}
	return fleetstatus.Write(out, r, now)
}
