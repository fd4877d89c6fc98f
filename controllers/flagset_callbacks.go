package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

func (c *Controller) flagSetHandler() typedHandler[*v1beta1.FeatureFlag] {
	return typedHandler[*v1beta1.FeatureFlag]{
		onAdd: c.onFlagSetCreated,
		onUpdate: func(old, new *v1beta1.FeatureFlag) {
			if topology.FlagSetChanged(old, new) {
				c.onFlagSetSpecChanged(new)
			}
		},
		onDelete: c.onFlagSetDeleted,
	}
}

func (c *Controller) onFlagSetCreated(ff *v1beta1.FeatureFlag) {
	c.event(v1beta1.FeatureFlagKind, "created")
	c.edits.edited(ff)
	c.upsertFlagSet(ff)
}

func (c *Controller) onFlagSetSpecChanged(ff *v1beta1.FeatureFlag) {
	c.event(v1beta1.FeatureFlagKind, "spec-changed")
	c.edits.edited(ff)
	c.upsertFlagSet(ff)
}

func (c *Controller) upsertFlagSet(ff *v1beta1.FeatureFlag) {
	d, err := c.topo.UpsertFlagSet(ff)
	if err != nil {
		log.Log.Error(err, "refused by the topology", "FeatureFlag", ff.Namespace+"/"+ff.Name)
		return
	}
	c.dispatch(d)
}

func (c *Controller) onFlagSetDeleted(ff *v1beta1.FeatureFlag) {
	c.event(v1beta1.FeatureFlagKind, "deleted")
	c.edits.forget(topology.FlagSetKey(ff.Namespace, ff.Name))
	c.dispatch(c.topo.DeleteFlagSet(ff.Namespace, ff.Name))
}
