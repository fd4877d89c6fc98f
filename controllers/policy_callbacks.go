package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// +kubebuilder:rbac:groups=policy.flagplane.dev,resources=featureflagsourcepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.flagplane.dev,resources=featureflagsourcepolicies/status,verbs=get;update;patch

func (c *Controller) sourcePolicyHandler() typedHandler[*policyv1alpha1.FeatureFlagSourcePolicy] {
	return typedHandler[*policyv1alpha1.FeatureFlagSourcePolicy]{
		onAdd: c.onSourcePolicyCreated,
		onUpdate: func(old, new *policyv1alpha1.FeatureFlagSourcePolicy) {
			if topology.SourcePolicyChanged(old, new) {
				c.onSourcePolicySpecChanged(new)
			}
		},
		onDelete: c.onSourcePolicyDeleted,
	}
}

func (c *Controller) onSourcePolicyCreated(p *policyv1alpha1.FeatureFlagSourcePolicy) {
	c.event(policyv1alpha1.FeatureFlagSourcePolicyKind, "created")
	c.upsertSourcePolicy(p)
}

func (c *Controller) onSourcePolicySpecChanged(p *policyv1alpha1.FeatureFlagSourcePolicy) {
	c.event(policyv1alpha1.FeatureFlagSourcePolicyKind, "spec-changed")
	c.upsertSourcePolicy(p)
}

func (c *Controller) upsertSourcePolicy(p *policyv1alpha1.FeatureFlagSourcePolicy) {
	d, err := c.topo.UpsertSourcePolicy(p)
	if err != nil {
		log.Log.Error(err, "refused by the topology", "FeatureFlagSourcePolicy", p.Namespace+"/"+p.Name)
		return
	}
	c.dispatch(d)
}

func (c *Controller) onSourcePolicyDeleted(p *policyv1alpha1.FeatureFlagSourcePolicy) {
	c.event(policyv1alpha1.FeatureFlagSourcePolicyKind, "deleted")
	c.dispatch(c.topo.DeleteSourcePolicy(p.Namespace, p.Name))
}
