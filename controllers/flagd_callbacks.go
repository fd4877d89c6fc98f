package controllers

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagds"
)

// The Flagd kind: a Flagd's informer events edit the graph (its node, served
// by its FeatureFlagSource); the events of the objects generated for it —
// its Deployment, Service, Ingress and HTTPRoute, found by their owner
// reference — only say that the cluster may have drifted, or that its
// Deployment's readiness changed, and queue the Flagd. The HTTPRoute
// informer starts when Gateway API's CRDs are installed, at start-up or
// later (checked every Options.GrantCRDPoll), without a restart.

// +kubebuilder:rbac:groups=core.openfeature.dev,resources=flagds,verbs=get;list;watch
// +kubebuilder:rbac:groups=core.openfeature.dev,resources=flagds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=create
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete

// HTTPRouteGroupKind is Gateway API's HTTPRoute, which a Flagd asks for
// with spec.gatewayApiRoutes.
var HTTPRouteGroupKind = schema.GroupKind{Group: flagds.HTTPRouteGVK.Group, Kind: flagds.HTTPRouteGVK.Kind}

// flagdCacheOptions restricts the cache to the Services and Ingresses
// flagplane generates.
func flagdCacheOptions(base cache.Options, managed labels.Selector) {
	base.ByObject[&corev1.Service{}] = cache.ByObject{Label: managed}
	base.ByObject[&networkingv1.Ingress{}] = cache.ByObject{Label: managed}
}

// setupFlagds makes the Flagd workflow and its queue; the kinds table
// registers the callbacks of Flagds and of what is generated for them.
func (c *Controller) setupFlagds(mgr manager.Manager, events func(kind string) func(string)) {
	c.flagdWF = &flagds.Reconciler{
		Client: c.client, Live: mgr.GetAPIReader(), Options: c.opts.Flagd, RBAC: c.rbacWF,
		Writes:   func(kind, verb string) { events(kind)(verb) },
		Events:   mgr.GetEventRecorder("flagplane"),
		Failures: &c.failures,
	}
	c.flagds = newWorkQueue(c.log, "flagds", c.opts.Workers, c.reconcileFlagd)
	if c.opts.Metrics != nil {
		c.flagds.observe = c.opts.Metrics.Reconciled
	}
}

// flagdChildHandler: an object generated for a Flagd was created, changed
// or deleted; its Flagd (by owner reference, before or after the change) is
// reconciled again. Updates that change neither what flagplane writes nor
// the readiness of a Deployment are dropped.
func (c *Controller) flagdChildHandler() typedHandler[client.Object] {
	changed := func(event string, objs ...client.Object) {
		for _, k := range flagdOwners(objs...) {
			c.event(v1beta1.FlagdKind, event)
			if c.ready.Load() {
				c.enqueue(k)
			}
		}
	}
	return typedHandler[client.Object]{
		onAdd: func(o client.Object) { changed("child-created", o) },
		onUpdate: func(old, new client.Object) {
			if flagdChildChanged(old, new) {
				changed("child-changed", old, new)
			}
		},
		onDelete: func(o client.Object) { changed("child-deleted", o) },
	}
}

// flagdOwners lists the Flagds that control objs, once each.
func flagdOwners(objs ...client.Object) []topology.Key {
	var out []topology.Key
	for _, o := range objs {
		ref := metav1.GetControllerOfNoCopy(o)
		if ref == nil || ref.Kind != v1beta1.FlagdKind {
			continue
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1beta1.GroupVersion.Group {
			continue
		}
		if k := topology.FlagdKey(o.GetNamespace(), ref.Name); len(out) == 0 || out[0] != k {
			out = append(out, k)
		}
	}
	return out
}

// flagdChildChanged: what flagplane writes (spec, labels, annotations,
// owners, who manages which field) or a Deployment's readiness.
func flagdChildChanged(old, new client.Object) bool {
	if old.GetGeneration() != new.GetGeneration() || !maps.Equal(old.GetLabels(), new.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), new.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(old.GetOwnerReferences(), new.GetOwnerReferences()) ||
		!equality.Semantic.DeepEqual(old.GetManagedFields(), new.GetManagedFields()) {
		return true
	}
	switch o := old.(type) {
	case *appsv1.Deployment:
		n := new.(*appsv1.Deployment)
		return o.Status.ReadyReplicas != n.Status.ReadyReplicas || o.Status.Replicas != n.Status.Replicas
	case *corev1.Service:
		// A Service's spec has no generation.
		return !equality.Semantic.DeepEqual(o.Spec, new.(*corev1.Service).Spec)
	}
	return false
}

// routesFrom adds the HTTPRoute line's handler to the informer of the
// HTTPRoutes flagplane generates, in a cache of their own (the manager's
// cannot be told about a kind whose CRD may not exist yet), from the
// moment Gateway API's CRDs are installed.
func (c *Controller) routesFrom(ctx context.Context, mgr manager.Manager, add addFunc[*unstructured.Unstructured]) error {
	_, err := mgr.GetRESTMapper().RESTMapping(HTTPRouteGroupKind, flagds.HTTPRouteGVK.Version)
	if meta.IsNoMatchError(err) {
		log.FromContext(ctx).Info("HTTPRoute CRD not installed: Flagds' HTTPRoutes wait until it is",
			"checkingEvery", c.opts.GrantCRDPoll.String())
		return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return c.waitForRoutes(ctx, mgr, add) }))
	}
	if err != nil {
		return fmt.Errorf("looking up HTTPRoute: %w", err)
	}
	return c.watchRoutes(ctx, mgr, add)
}

// waitForRoutes looks for the HTTPRoute CRD until it is installed, then
// watches HTTPRoutes (see watchRoutes).
func (c *Controller) waitForRoutes(ctx context.Context, mgr manager.Manager, add addFunc[*unstructured.Unstructured]) error {
	t := time.NewTicker(c.opts.GrantCRDPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_, err := mgr.GetRESTMapper().RESTMapping(HTTPRouteGroupKind, flagds.HTTPRouteGVK.Version)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			log.FromContext(ctx).Error(err, "looking up HTTPRoute")
			continue
		}
		if err := c.watchRoutes(ctx, mgr, add); err != nil {
			return err
		}
		log.FromContext(ctx).Info("HTTPRoute CRD installed: watching the HTTPRoutes of Flagds")
		return nil
	}
}

// watchRoutes starts a cache of managed HTTPRoutes (in the manager's
// namespaces) with the line's handler on it, and once it has synced hands
// it to the Flagd workflow and reconciles every Flagd that asks for an
// HTTPRoute.
func (c *Controller) watchRoutes(ctx context.Context, mgr manager.Manager, add addFunc[*unstructured.Unstructured]) error {
	route := &unstructured.Unstructured{}
	route.SetGroupVersionKind(flagds.HTTPRouteGVK)
	var namespaces map[string]cache.Config
	for _, ns := range c.opts.Namespaces {
		if namespaces == nil {
			namespaces = map[string]cache.Config{}
		}
		namespaces[ns] = cache.Config{}
	}
	routes, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: namespaces,
		ByObject:          map[client.Object]cache.ByObject{route: {Label: c.opts.Settings.Generated.Selector()}},
	})
	if err != nil {
		return fmt.Errorf("creating the HTTPRoute cache: %w", err)
	}
	if err := add(ctx, routes, route); err != nil {
		return err
	}
	if err := mgr.Add(routes); err != nil {
		return fmt.Errorf("adding the HTTPRoute cache to the manager: %w", err)
	}
	go func() {
		if !routes.WaitForCacheSync(ctx) {
			return
		}
		c.flagdWF.SetRoutes(routes)
		// The Flagds that asked for an HTTPRoute meanwhile get it now.
		v := c.topo.Snapshot()
		for _, k := range v.Flagds() {
			if f, ok := v.Flagd(k); ok && f.Spec.GatewayApiRoutes.Enabled {
				c.enqueue(k)
			}
		}
	}()
	return nil
}

func (c *Controller) flagdRouteHandler() typedHandler[*unstructured.Unstructured] {
	h := c.flagdChildHandler()
	return typedHandler[*unstructured.Unstructured]{
		onAdd: func(u *unstructured.Unstructured) { h.onAdd(u) },
		onUpdate: func(old, new *unstructured.Unstructured) {
			if !equality.Semantic.DeepEqual(old.Object["spec"], new.Object["spec"]) || flagdChildChanged(old, new) {
				h.onUpdate(old, new)
			}
		},
		onDelete: func(u *unstructured.Unstructured) { h.onDelete(u) },
	}
}

func (c *Controller) reconcileFlagd(ctx context.Context, key topology.Key) error {
	return c.flagdWF.Reconcile(ctx, c.topo.Snapshot(), key)
}
