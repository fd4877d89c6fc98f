package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ReferenceGrantGroupKind is Gateway API's ReferenceGrant, which flagplane
// reads for cross-namespace references from FeatureFlagSources to FeatureFlags.
var ReferenceGrantGroupKind = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "ReferenceGrant"}

// grantsFrom adds the ReferenceGrant line's handler to their informer.
// When their CRD is not installed yet, it looks for it every
// Options.GrantCRDPoll and starts watching once Gateway API is installed,
// without a restart; meanwhile cross-namespace references stay unresolved
// (and say so).
func (c *Controller) grantsFrom(ctx context.Context, mgr manager.Manager, add addFunc[*unstructured.Unstructured]) error {
	mapping, err := mgr.GetRESTMapper().RESTMapping(ReferenceGrantGroupKind)
	if meta.IsNoMatchError(err) {
		log.FromContext(ctx).Info("ReferenceGrant CRD not installed: cross-namespace references will not resolve until it is",
			"checkingEvery", c.opts.GrantCRDPoll.String())
		return mgr.Add(&grantCRDWatcher{c: c, mapper: mgr.GetRESTMapper(), add: add})
	}
	if err != nil {
		return fmt.Errorf("looking up ReferenceGrant: %w", err)
	}
	return add(ctx, c.cache, grantObject(mapping))
}

func grantObject(mapping *meta.RESTMapping) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	return u
}

// grantCRDWatcher waits for the ReferenceGrant CRD, then watches
// ReferenceGrants. Every replica runs it: every replica keeps the graph.
type grantCRDWatcher struct {
	c      *Controller
	mapper meta.RESTMapper
	add    addFunc[*unstructured.Unstructured]
}

func (w *grantCRDWatcher) NeedLeaderElection() bool { return false }

func (w *grantCRDWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.c.opts.GrantCRDPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// The mapper asks discovery again for a group it does not know.
		mapping, err := w.mapper.RESTMapping(ReferenceGrantGroupKind)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			log.FromContext(ctx).Error(err, "looking up ReferenceGrant")
			continue
		}
		if err := w.add(ctx, w.c.cache, grantObject(mapping)); err != nil {
			return fmt.Errorf("watching ReferenceGrants, whose CRD was installed: %w", err)
		}
		log.FromContext(ctx).Info("ReferenceGrant CRD installed: watching ReferenceGrants", "version", mapping.GroupVersionKind.Version)
		return nil
	}
}
