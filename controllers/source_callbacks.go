package controllers

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

func (c *Controller) sourceHandler() typedHandler[*v1beta1.FeatureFlagSource] {
	return typedHandler[*v1beta1.FeatureFlagSource]{
		onAdd: c.onSourceCreated,
		onUpdate: func(old, new *v1beta1.FeatureFlagSource) {
			switch {
			case !topology.SourceChanged(old, new):
				// Status, resourceVersion, unrelated metadata: the graph's rule.
			case old.UID != new.UID:
				c.onSourceCreated(new)
			case sourceTargetsChanged(old, new):
				c.onSourceTargetsChanged(new)
			default:
				c.onSourceSettingsChanged(new)
			}
		},
		onDelete: c.onSourceDeleted,
	}
}

// sourceTargetsChanged: the workloads a source applies to may differ.
func sourceTargetsChanged(old, new *v1beta1.FeatureFlagSource) bool {
	return !equality.Semantic.DeepEqual(old.Spec.TargetRefs, new.Spec.TargetRefs) ||
		!equality.Semantic.DeepEqual(old.Spec.Selector, new.Spec.Selector)
}

func (c *Controller) onSourceCreated(s *v1beta1.FeatureFlagSource) {
	c.event(v1beta1.FeatureFlagSourceKind, "created")
	c.upsertSource(s)
}

func (c *Controller) onSourceTargetsChanged(s *v1beta1.FeatureFlagSource) {
	c.event(v1beta1.FeatureFlagSourceKind, "targets-changed")
	c.upsertSource(s)
}

// onSourceSettingsChanged: sidecar settings (spec, or an annotation the
// injection reads) or flag sources changed.
func (c *Controller) onSourceSettingsChanged(s *v1beta1.FeatureFlagSource) {
	c.event(v1beta1.FeatureFlagSourceKind, "settings-changed")
	c.upsertSource(s)
}

func (c *Controller) upsertSource(s *v1beta1.FeatureFlagSource) {
	d, err := c.topo.UpsertSource(s)
	if err != nil {
		log.Log.Error(err, "refused by the topology", "FeatureFlagSource", s.Namespace+"/"+s.Name)
		return
	}
	c.dispatch(d)
}

func (c *Controller) onSourceDeleted(s *v1beta1.FeatureFlagSource) {
	c.event(v1beta1.FeatureFlagSourceKind, "deleted")
	c.dispatch(c.topo.DeleteSource(s.Namespace, s.Name))
}
