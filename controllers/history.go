package controllers

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/history"
)

// The revision history (workflows/history) on the history queue, which
// runs on the leader with the others. A FeatureFlag comes onto it:
//   - from every Delta that names it (dispatch), so once the graph holds
//     the rendering of its spec: the history never waits for one;
//   - when an update the graph does not read changes its annotations (the
//     revision history limit, the spec's author and change cause);
//   - from the events of its revisions, and of the rollout policies that
//     target it (the revisions their status names are kept).

// reconcileHistory records and prunes the history of a FeatureFlag.
func (c *Controller) reconcileHistory(ctx context.Context, key topology.Key) error {
	if key.Kind != topology.KindFlagSet {
		return reconcile.TerminalError(errNotThisQueue)
	}
	res, err := c.opts.History.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: key.Namespace, Name: key.Name}})
	if err == nil && res.RequeueAfter > 0 {
		return workflows.RequeueAfter(res.RequeueAfter)
	}
	return err
}

// flagSetMetadataChanged: a FeatureFlag update the graph does not read;
// the history reads its annotations.
func (c *Controller) flagSetMetadataChanged(old, new *v1beta1.FeatureFlag) {
	if c.history != nil && !maps.Equal(old.Annotations, new.Annotations) {
		c.history.Add(topology.FlagSetKey(new.Namespace, new.Name))
	}
}

// historyOfRevision puts the FeatureFlags a revision's event concerns on
// the history queue.
func (c *Controller) historyOfRevision(r *deliveryv1alpha1.FeatureFlagRevision) {
	if c.history == nil {
		return
	}
	for _, f := range c.opts.History.FlagSetsOfRevision(r) {
		c.history.Add(f)
	}
}

// historyOfPolicy puts the FeatureFlag a rollout policy targets on the
// history queue.
func (c *Controller) historyOfPolicy(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
	if c.history == nil {
		return
	}
	if f, ok := history.FlagSetOfPolicy(p); ok {
		c.history.Add(f)
	}
}
