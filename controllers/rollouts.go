package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrolloutpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrolloutpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// The staged rollouts (issue 30): FeatureFlagRolloutPolicies, the
// FeatureFlagRevisions whose content a plan serves, and the labels of
// Namespaces enter the graph (their lines in the kinds table, kinds.go), which plans who serves what
// (topology.View.RolloutPlan); the rollouts queue moves each policy through
// its steps (staging.Next) and writes its status, which the plan reads.

// rolloutPolicyEdited: a policy was created or changed; a promotion or an
// abort changes no plan, so the policy is looked at again whatever the
// graph says.
func (c *Controller) rolloutPolicyEdited(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
	c.rollouts.Add(topology.RolloutPolicyKey(p.Namespace, p.Name))
	c.historyOfPolicy(p)
}

// reconcileRollout reconciles a rollout policy (staging.Reconciler).
func (c *Controller) reconcileRollout(ctx context.Context, key topology.Key) error {
	if key.Kind != topology.KindRolloutPolicy {
		return errNotThisQueue
	}
	return c.stagingWF.Reconcile(ctx, key)
}

// workloadOfPod adapts the owners of pods to what staging reads.
type workloadOfPod struct{ owners restarts.Owners }

func (o workloadOfPod) WorkloadOf(ctx context.Context, namespace string, pod *corev1.Pod) (topology.Key, bool) {
	res := o.owners.WorkloadOf(ctx, namespace, pod)
	return res.Workload, res.OK
}

// enqueueRolloutsOf puts the rollout policies of a flag set on their queue:
// what its consumers serve may have changed.
func (c *Controller) enqueueRolloutsOf(v *topology.View, f topology.Key) {
	for _, p := range v.RolloutPoliciesOf(f) {
		c.rollouts.Add(topology.RolloutPolicyKey(p.Namespace, p.Name))
	}
}

// enqueueRunningRolloutsIn puts the running rollouts with consumers in
// namespace on their queue: a pod there changed, which a gate may read.
func (c *Controller) enqueueRunningRolloutsIn(namespace string) {
	v := c.topo.Snapshot()
	for _, k := range v.RolloutPolicies() {
		p, ok := v.RolloutPolicy(k)
		if !ok || (p.Status.Phase != deliveryv1alpha1.PhaseProgressing && p.Status.Phase != deliveryv1alpha1.PhasePaused) || len(p.Spec.Gates) == 0 {
			continue
		}
		plan := v.RolloutPlan(topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name))
		if plan == nil {
			continue
		}
		for _, cons := range plan.Consumers {
			if cons.Namespace == namespace {
				c.rollouts.Add(k)
				break
			}
		}
	}
}
