package fleet

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

// Options configure a hub.
type Options struct {
	// InventoryNamespace holds the ClusterProfiles and FleetGrants.
	InventoryNamespace string
	// Access maps a ClusterProfile's access providers to the exec plugins
	// that give the hub its credentials for the member.
	Access *access.Config
	// Heartbeat is how often a member's API server is asked whether it
	// answers (5 s when zero); ProbeTimeout bounds one ask (2 s when zero).
	Heartbeat    time.Duration
	ProbeTimeout time.Duration
	// Engine, when set, is the source of members instead of the
	// inventory's ClusterProfiles (engine.go); Access is then not used.
	Engine Engine
}

func (o *Options) complete() error {
	if o.InventoryNamespace == "" {
		return errors.New("fleet: the inventory namespace is not set")
	}
	if o.Access == nil && o.Engine == nil {
		return errors.New("fleet: no access providers: the hub cannot reach any member")
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 5 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	return nil
}

// CacheOptions are the cache options of a hub's manager: its
// ClusterProfiles and FleetGrants are those of the inventory namespace
// only, all the hub may read of them (config/fleet/hub).
func CacheOptions(inventoryNamespace string) cache.Options {
	inventory := map[string]cache.Config{inventoryNamespace: {}}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&cpv1alpha1.ClusterProfile{}: {Namespaces: inventory},
		&fleetv1alpha1.FleetGrant{}:  {Namespaces: inventory},
	}}
}

// Hub is a fleet hub's controllers, added to a manager of the hub.
type Hub struct {
	// Members are the engaged member clusters.
	Members *Members
}

// Add adds the hub's controllers to mgr, whose scheme must know
// flagplane's API and the ClusterProfile.
func Add(mgr manager.Manager, o Options) (*Hub, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	changed := make(chan event.GenericEvent, 1024)
	inInventory := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == o.InventoryNamespace
	})
	engaged, members, err := o.members(mgr, inInventory, changed)
	if err != nil {
		return nil, err
	}
	pl := &placements{hub: mgr.GetClient(), wf: &fleetwf.Reconciler{Hub: mgr.GetClient(), Members: engaged,
		InventoryNamespace: o.InventoryNamespace, Events: mgr.GetEventRecorder("flagplane-fleet")}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("fleet-placement").
		For(&fleetv1alpha1.FeatureFlagPlacement{}).
		Watches(&v1beta1.FeatureFlag{}, handler.EnqueueRequestsFromMapFunc(pl.ofFlagSet)).
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(pl.all),
			builder.WithPredicates(inInventory)).
		Watches(&fleetv1alpha1.FleetGrant{}, handler.EnqueueRequestsFromMapFunc(pl.all),
			builder.WithPredicates(inInventory)).
		Watches(&deliveryv1alpha1.FeatureFlagRolloutPolicy{}, handler.EnqueueRequestsFromMapFunc(pl.ofPolicy)).
		WatchesRawSource(source.Channel(changed, handler.EnqueueRequestsFromMapFunc(pl.ofMemberEvent))).
		WithOptions(controllerOptions(4)).
		Complete(pl); err != nil {
		return nil, err
	}
	return &Hub{Members: members}, nil
}

// addInventory engages the members of the inventory's ClusterProfiles.
func addInventory(mgr manager.Manager, o Options, inInventory predicate.Predicate,
	changed chan<- event.GenericEvent) (*Members, error) {
	members := newMembers(o.Access, mgr.GetScheme(), o, changed)
	inv := &inventory{hub: mgr.GetClient(), members: members, namespace: o.InventoryNamespace}
	if err := ctrl.NewControllerManagedBy(mgr).Named("fleet-inventory").
		For(&cpv1alpha1.ClusterProfile{}, builder.WithPredicates(inInventory)).
		Watches(&fleetv1alpha1.FleetGrant{}, handler.EnqueueRequestsFromMapFunc(inv.allProfiles),
			builder.WithPredicates(inInventory)).
		WithOptions(controllerOptions(4)).
		Complete(inv); err != nil {
		return nil, err
	}
	return members, nil
}

// inventory engages the member of each ClusterProfile.
type inventory struct {
	hub       client.Client
	members   *Members
	namespace string
}

func (i *inventory) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cp cpv1alpha1.ClusterProfile
	if err := i.hub.Get(ctx, req.NamespacedName, &cp); err != nil {
		if client.IgnoreNotFound(err) == nil {
			i.members.disengage(req.Name, "")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	var grants fleetv1alpha1.FleetGrantList
	if err := i.hub.List(ctx, &grants, client.InNamespace(i.namespace)); err != nil {
		return reconcile.Result{}, err
	}
	if err := i.members.engage(ctx, &cp, fleetwf.GrantedNamespaces(cp.Labels, grants.Items)); err != nil {
		// An unreachable member is retried with the queue's backoff; the
		// placements show it as Unknown meanwhile.
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

func (i *inventory) allProfiles(ctx context.Context, _ client.Object) []reconcile.Request {
	var list cpv1alpha1.ClusterProfileList
	if err := i.hub.List(ctx, &list, client.InNamespace(i.namespace)); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, cp := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cp)})
	}
	return out
}

// placements runs the placement workflow on the hub's queue.
type placements struct {
	hub client.Client
	wf  *fleetwf.Reconciler
}

func (p *placements) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	again, err := p.wf.Reconcile(ctx, req.NamespacedName)
	return reconcile.Result{RequeueAfter: again}, err
}

// ofFlagSet queues the placements that target a hub FeatureFlag.
func (p *placements) ofFlagSet(ctx context.Context, obj client.Object) []reconcile.Request {
	var list fleetv1alpha1.FeatureFlagPlacementList
	if err := p.hub.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, pl := range list.Items {
		if pl.Spec.TargetRef.Name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pl)})
		}
	}
	return out
}

// ofPolicy queues the placements of a rollout policy's FeatureFlag.
func (p *placements) ofPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	pol, ok := obj.(*deliveryv1alpha1.FeatureFlagRolloutPolicy)
	if !ok {
		return nil
	}
	target := &v1beta1.FeatureFlag{}
	target.Namespace, target.Name = pol.Namespace, pol.Spec.TargetRef.Name
	return p.ofFlagSet(ctx, target)
}

// ofMemberEvent queues the placement that wrote a member's FeatureFlag, or
// the placements of its name when no placement wrote it, or every
// placement for a change of a member's reach (a FeatureFlag without name).
func (p *placements) ofMemberEvent(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetName() == "" {
		return p.all(ctx, obj)
	}
	if name := obj.GetLabels()[fleetv1alpha1.PlacementLabel]; name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
	}
	return p.ofFlagSet(ctx, obj)
}

func (p *placements) all(ctx context.Context, _ client.Object) []reconcile.Request {
	var list fleetv1alpha1.FeatureFlagPlacementList
	if err := p.hub.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, pl := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pl)})
	}
	return out
}

// controllerOptions are the options of the hub's controllers: n
// reconciles at once, so that one slow member does not hold the others.
// Their names are the hub's own; a process that builds the hub again
// (tests, a restarted leader) may reuse them.
func controllerOptions(n int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: n, SkipNameValidation: ptr.To(true)}
}
