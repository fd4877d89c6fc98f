package controllers

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/status"
)

// The two types of a line of the kinds table (kinds.go), and the one place
// that adds an informer handler: attach.

// registrar is a line of the kinds table.
type registrar interface {
	register(ctx context.Context, c *Controller) error
	// routes names the kind, the queue of its keys (nil: no queue
	// reconciles them) and, on the statuses queue, its status writer.
	routes() route
}

// route is where a kind's keys go (routing.go).
type route struct {
	kind  topology.Kind
	queue *workQueue[topology.Key]
	// status writes an object's status from the graph: the kinds on the
	// statuses queue have one, the others none.
	status statusWriter
}

// statusWriter is a status.Updater method that writes one kind's status.
type statusWriter func(*status.Updater, context.Context, *topology.View, topology.Key) error

// informers is where an informer is had: the manager's cache, or a cache
// of a kind's own.
type informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// addFunc adds a line's handler to the informer of obj in src.
type addFunc[T client.Object] func(ctx context.Context, src informers, obj T) error

// graphKind is a line of a kind whose informer edits the graph.
type graphKind[T client.Object] struct {
	// object is the informer's type.
	object T
	// name is the kind in the events counted (Metrics.Event).
	name string
	// change says what an update of an object with the same UID changed,
	// as the event it counts as, or "" when nothing the graph reads did.
	// A new UID is a re-creation, always relevant.
	change func(old, new T) string
	// upsert and remove edit the graph.
	upsert func(*topology.Topology, T) (topology.Delta, error)
	remove func(*topology.Topology, T) topology.Delta
	// queue reconciles the keys of the kind that a Delta names (nil: none
	// does).
	queue *workQueue[topology.Key]
	// status, for a kind on the statuses queue, writes an object's status
	// (reconcileStatus), and the start-up pass writes each one's once.
	status statusWriter
	// edited and deleted, when set, hear of each created or changed
	// object before the graph does, and of each deleted one; ignored, of
	// each update the graph does not read (change says "").
	edited  func(T)
	deleted func(T)
	ignored func(old, new T)
	// from, when set, says where and when the kind's informer is had (see
	// attach): for a kind whose CRD may be installed after the manager
	// starts (ReferenceGrant).
	from func(context.Context, addFunc[T]) error
	// clusterScoped: the kind is cluster-scoped, and a namespaced install
	// (Options.Namespaces), which cannot read it, does not watch it.
	clusterScoped bool
}

// watchedKind is a line of a kind whose informer feeds a queue, or a
// lookup, without editing the graph's objects: generated objects, pods.
type watchedKind[T client.Object] struct {
	// object is the informer's type.
	object T
	// name is the kind, for the reader of the table.
	name string
	// handler hears of the informer's events; none (the zero value): the
	// informer is only read (the owners of pods).
	handler typedHandler[T]
	// from is as graphKind.from: a cache of its own, a CRD installed later.
	from func(context.Context, addFunc[T]) error
}

func (k graphKind[T]) routes() route {
	return route{kind: topology.Kind(k.name), queue: k.queue, status: k.status}
}

func (k graphKind[T]) register(ctx context.Context, c *Controller) error {
	if k.clusterScoped && len(c.opts.Namespaces) > 0 {
		return nil
	}
	return attach(ctx, c, k.object, k.from, k.handler(c))
}

func (k watchedKind[T]) routes() route { return route{} }

func (k watchedKind[T]) register(ctx context.Context, c *Controller) error {
	if k.handler.onAdd == nil && k.handler.onUpdate == nil && k.handler.onDelete == nil {
		if _, err := c.cache.GetInformer(ctx, k.object); err != nil {
			return fmt.Errorf("getting the %s informer: %w", k.name, err)
		}
		return nil
	}
	return attach(ctx, c, k.object, k.from, k.handler)
}

// attach adds h to the informer of a kind: of obj in the manager's cache,
// at once, when from is nil; otherwise wherever and whenever from calls
// the add it is given. Handlers added to the manager's cache while the
// table is registered are those the start-up pass waits for (run).
func attach[T client.Object](ctx context.Context, c *Controller, obj T, from func(context.Context, addFunc[T]) error, h typedHandler[T]) error {
	add := func(ctx context.Context, src informers, obj T) error {
		inf, err := src.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer of %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("adding the handler of %T: %w", obj, err)
		}
		if !c.registered.Load() && src == informers(c.cache) {
			c.handlers = append(c.handlers, reg)
		}
		return nil
	}
	if from == nil {
		return add(ctx, c.cache, obj)
	}
	return from(ctx, add)
}

// handler turns the kind's informer events into graph edits.
func (k graphKind[T]) handler(c *Controller) typedHandler[T] {
	return typedHandler[T]{
		onAdd: func(obj T) { k.upserted(c, obj, "created") },
		onUpdate: func(old, new T) {
			event := "created"
			if old.GetUID() == new.GetUID() {
				if event = k.change(old, new); event == "" {
					if k.ignored != nil {
						k.ignored(old, new)
					}
					return
				}
			}
			k.upserted(c, new, event)
		},
		onDelete: func(obj T) {
			c.event(k.name, "deleted")
			if k.deleted != nil {
				k.deleted(obj)
			}
			c.dispatch(k.remove(c.topo, obj))
		},
	}
}

func (k graphKind[T]) upserted(c *Controller, obj T, event string) {
	c.event(k.name, event)
	if k.edited != nil {
		k.edited(obj)
	}
	d, err := k.upsert(c.topo, obj)
	if err != nil {
		c.log.Error(err, "refused by the topology", k.name, klog.KObj(obj))
		return
	}
	c.dispatch(d)
}
