package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flagplane/flagplane/workflows"
)

// ReferenceGrantGroupKind is Gateway API's ReferenceGrant, which flagplane
// reads for cross-namespace references from FeatureFlagSources to FeatureFlags.
var ReferenceGrantGroupKind = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "ReferenceGrant"}

// registerGrantCallbacks watches ReferenceGrants when their CRD is installed.
// Without it, cross-namespace references stay unresolved (and say so).
func (c *Controller) registerGrantCallbacks(ctx context.Context, mgr manager.Manager) error {
	mapping, err := mgr.GetRESTMapper().RESTMapping(ReferenceGrantGroupKind)
	if meta.IsNoMatchError(err) {
		log.FromContext(ctx).Info("ReferenceGrant CRD not installed: cross-namespace flag set references will not resolve")
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up ReferenceGrant: %w", err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	return addHandler(ctx, c, u, typedHandler[*unstructured.Unstructured]{
		onAdd:    c.onGrantChanged,
		onUpdate: func(_, new *unstructured.Unstructured) { c.onGrantChanged(new) },
		onDelete: c.onGrantDeleted,
	})
}

func (c *Controller) onGrantChanged(u *unstructured.Unstructured) {
	c.event(ReferenceGrantGroupKind.Kind, "changed")
	d, err := c.topo.UpsertGrant(workflows.GrantFromReferenceGrant(u))
	if err != nil {
		log.Log.Error(err, "refused by the topology", "ReferenceGrant", u.GetNamespace()+"/"+u.GetName())
		return
	}
	c.dispatch(d)
}

func (c *Controller) onGrantDeleted(u *unstructured.Unstructured) {
	c.event(ReferenceGrantGroupKind.Kind, "deleted")
	c.dispatch(c.topo.DeleteGrant(u.GetNamespace(), u.GetName()))
}
