package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api"
	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/rolloutstatus"
	"github.com/flagplane/flagplane/topology"
)

func newRolloutCmd(kube *kubeFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout status|promote|pause|abort ff/NAME",
		Short: "Watch and steer the staged rollout of a FeatureFlag's edit",
		Long: `Shows and steers the FeatureFlagRolloutPolicy that stages the edits of a
FeatureFlag (the oldest one targeting it, the one in force):

  status   the phase, the step, the stable and the target revision, and
           each step's consumers with what they are planned to serve and
           what they serve
  promote  ends the current step's wait (its pause or its approval), and
           unpauses a paused policy
  pause    holds the rollout at its step (spec.paused): consumers keep
           what they serve
  abort    every consumer returns to the stable revision; the rollout
           stays aborted until the FeatureFlag is edited again

promote and abort name the revision and step they mean, so that a command
typed for one rollout never acts on the next.`,
		Example: `  flagplane rollout status ff/checkout -n shop
  flagplane rollout promote ff/checkout -n shop
  kubectl flagplane rollout abort featureflag/checkout -n shop`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			action, name := args[0], args[1]
			if !slices.Contains([]string{"status", "promote", "pause", "abort"}, action) {
				return fmt.Errorf("%w: unknown rollout command %q: status, promote, pause or abort", errUsage, action)
			}
			flagSet, err := flagSetArg(name)
			if err != nil {
				return err
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			ns, err := kube.namespace(false)
			if err != nil {
				return err
			}
			scheme := runtime.NewScheme()
			if err := api.AddToScheme(scheme); err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return fmt.Errorf("creating a client: %w", err)
			}
			return unreachable(cfg, runRollout(cmd.Context(), c, action, ns, flagSet, cmd.OutOrStdout()))
		},
	}
	return cmd
}

// flagSetArg reads ff/NAME or featureflag(s)/NAME.
func flagSetArg(arg string) (string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || !slices.Contains([]string{"ff", "featureflag", "featureflags", "featureflag.core.openfeature.dev"}, strings.ToLower(kind)) {
		return "", fmt.Errorf("%w: name the FeatureFlag as ff/NAME, not %q", errUsage, arg)
	}
	return name, nil
}

// policyOf finds the rollout policy in force for a flag set.
func policyOf(ctx context.Context, c client.Client, ns, flagSet string) (*deliveryv1alpha1.FeatureFlagRolloutPolicy, error) {
	var list deliveryv1alpha1.FeatureFlagRolloutPolicyList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing FeatureFlagRolloutPolicies of namespace %s: %w", ns, err)
	}
	var found []*deliveryv1alpha1.FeatureFlagRolloutPolicy
	for i := range list.Items {
		if list.Items[i].Spec.TargetRef.Name == flagSet {
			found = append(found, &list.Items[i])
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no FeatureFlagRolloutPolicy of namespace %s targets FeatureFlag %s: its edits reach every consumer at once", ns, flagSet)
	}
	slices.SortFunc(found, func(a, b *deliveryv1alpha1.FeatureFlagRolloutPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return found[0], nil
}

func runRollout(ctx context.Context, c client.Client, action, ns, flagSet string, out io.Writer) error {
	p, err := policyOf(ctx, c, ns, flagSet)
	if err != nil {
		return err
	}
	st := p.Status
	running := st.Phase == deliveryv1alpha1.PhaseProgressing || st.Phase == deliveryv1alpha1.PhasePaused
	switch action {
	case "status":
		// What the pods serve is the FeatureFlag's to say; without read
		// access to it, the rollout is shown without.
		var ff v1beta1.FeatureFlag
		var pods []v1beta1.NamespaceServing
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: flagSet}, &ff); err == nil {
			pods = ff.Status.Serving
		}
		return rolloutstatus.Write(out, p, pods, time.Now())
	case "pause":
		if p.Spec.Paused {
			_, err := fmt.Fprintf(out, "FeatureFlagRolloutPolicy %s/%s is paused already\n", ns, p.Name)
			return err
		}
		if err := patchPolicy(ctx, c, p, map[string]any{"spec": map[string]any{"paused": true}}); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "paused FeatureFlagRolloutPolicy %s/%s at step %d\n", ns, p.Name, st.Step+1)
		return err
	case "abort":
		if !running {
			return fmt.Errorf("the rollout of FeatureFlag %s is %s: there is nothing to abort", flagSet, rolloutstatus.PhaseText(st.Phase))
		}
		if err := patchPolicy(ctx, c, p, map[string]any{"metadata": map[string]any{"annotations": map[string]string{deliveryv1alpha1.AbortAnnotation: deliveryv1alpha1.AbortValue(st)}}}); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "aborting rollout %d, of revision %s: every consumer returns to revision %s\n", st.Rollout,
			topology.ShortRevision(st.TargetRevision), topology.ShortRevision(st.StableRevision))
		return err
	default: // promote
		if !running {
			return fmt.Errorf("the rollout of FeatureFlag %s is %s: there is nothing to promote", flagSet, rolloutstatus.PhaseText(st.Phase))
		}
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			deliveryv1alpha1.PromoteAnnotation: deliveryv1alpha1.PromoteValue(st, st.Step)}}}
		if p.Spec.Paused {
			patch["spec"] = map[string]any{"paused": false}
		}
		if err := patchPolicy(ctx, c, p, patch); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "promoted step %d of %d of rollout %d, of revision %s\n", st.Step+1, len(p.Spec.Steps), st.Rollout,
			topology.ShortRevision(st.TargetRevision))
		return err
	}
}

func patchPolicy(ctx context.Context, c client.Client, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, p, client.RawPatch("application/merge-patch+json", data)); err != nil {
		return fmt.Errorf("patching FeatureFlagRolloutPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
