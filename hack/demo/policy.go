package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
)

// demoPolicy is the platform team's FeatureFlagSourcePolicy of the demo's
// namespace: a default memory limit and an override of a context value.
const demoPolicy = `apiVersion: policy.flagplane.dev/v1alpha1
kind: FeatureFlagSourcePolicy
metadata: {name: platform, namespace: %[1]s}
spec:
  targetRef: {group: "", kind: Namespace, name: %[1]s}
  defaults:
    resources: {limits: {memory: 64Mi}}
  overrides:
    contextValues: {region: eu-west-1}
`

// showPolicy applies the platform's FeatureFlagSourcePolicy, shows what it
// decides on the sample Deployment's sidecar (flagplane explain) and its
// status once the operator has judged it.
func (d *demo) showPolicy(ctx context.Context) error {
	ns := d.o.namespace
	d.step("A platform team's defaults and overrides for namespace %s (FeatureFlagSourcePolicy)", ns)
	manifest := fmt.Sprintf(demoPolicy, ns)
	d.block(manifest)
	if out, err := d.kubectl([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		return fmt.Errorf("applying the policy: %w: %s", err, out)
	}
	key := client.ObjectKey{Namespace: ns, Name: "platform"}
	var p policyv1alpha1.FeatureFlagSourcePolicy
	if err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := d.cp.Client.Get(ctx, key, &p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionEnforced)
		return c != nil && c.ObservedGeneration == p.Generation, nil
	}); err != nil {
		return fmt.Errorf("waiting for the policy's status: %w", err)
	}
	for _, t := range []string{policyv1alpha1.ConditionAccepted, policyv1alpha1.ConditionEnforced} {
		c := meta.FindStatusCondition(p.Status.Conditions, t)
		d.say("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
	}
	d.say("$ flagplane explain deployment/shop-web -n %s   (the part the policy decides)", ns)
	text, err := d.explain(ctx, "deployment", ns, "shop-web")
	if err != nil {
		return err
	}
	if i := strings.Index(text, "  settings decided by FeatureFlagSourcePolicies"); i >= 0 {
		text = text[i:]
	}
	d.block(text)
	d.say("New pods of the namespace get these settings; workloads whose sources ask for rolloutOnChange are rolled.")
	return nil
}
