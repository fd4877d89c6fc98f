package controllers

import (
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// typedHandler turns an informer's untyped notifications into typed
// callbacks, unwrapping the tombstones of deletes that the watch missed.
type typedHandler[T client.Object] struct {
	onAdd    func(T)
	onUpdate func(old, new T)
	onDelete func(T)
}

var _ toolscache.ResourceEventHandler = typedHandler[client.Object]{}

func (h typedHandler[T]) OnAdd(obj any, _ bool) {
	if o, ok := obj.(T); ok && h.onAdd != nil {
		h.onAdd(o)
	}
}

func (h typedHandler[T]) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(T)
	n, ok2 := newObj.(T)
	if !ok1 || !ok2 || h.onUpdate == nil {
		return
	}
	// A resync redelivers the same object: nothing can have changed.
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return
	}
	h.onUpdate(o, n)
}

func (h typedHandler[T]) OnDelete(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(T); ok && h.onDelete != nil {
		h.onDelete(o)
	}
}
