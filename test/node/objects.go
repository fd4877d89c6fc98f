package node

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// objectRef names a ConfigMap or Secret that a pod's volumes read.
type objectRef struct {
	resource  string // "configmaps" or "secrets"
	namespace string
	name      string
}

// objectWatches keeps one watch per ConfigMap or Secret that some pod's
// volumes read (a list and watch of that object by name, as the kubelet's
// watch-based manager does), shared by the pods that read it and stopped
// with the last of them. Every event notifies those pods, which re-project
// their volumes at once: the kubelet's periodic sync delay (up to a minute
// plus the cache TTL) is not modelled.
type objectWatches struct {
	client kubernetes.Interface

	mu      sync.Mutex
	watches map[objectRef]*objectWatch
	nextID  int
}

type objectWatch struct {
	informer    cache.SharedIndexInformer
	stop        chan struct{}
	subscribers map[int]func()
}

func newObjectWatches(client kubernetes.Interface) *objectWatches {
	return &objectWatches{client: client, watches: map[objectRef]*objectWatch{}}
}

// subscribe calls notify on every change of the object (and once its
// first list is in), until the returned cancel is called.
func (o *objectWatches) subscribe(ref objectRef, notify func()) (cancel func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.watches[ref]
	if !ok {
		w = o.start(ref)
		o.watches[ref] = w
	}
	o.nextID++
	id := o.nextID
	w.subscribers[id] = notify
	if w.informer.HasSynced() {
		go notify()
	}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(w.subscribers, id)
		if len(w.subscribers) == 0 && o.watches[ref] == w {
			close(w.stop)
			delete(o.watches, ref)
		}
	}
}

func (o *objectWatches) start(ref objectRef) *objectWatch {
	var example runtime.Object = &corev1.ConfigMap{}
	if ref.resource == "secrets" {
		example = &corev1.Secret{}
	}
	lw := cache.NewListWatchFromClient(o.client.CoreV1().RESTClient(), ref.resource, ref.namespace,
		fields.OneTermEqualSelector("metadata.name", ref.name))
	w := &objectWatch{
		informer:    cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{}),
		stop:        make(chan struct{}),
		subscribers: map[int]func(){},
	}
	notify := func() {
		o.mu.Lock()
		subs := make([]func(), 0, len(w.subscribers))
		for _, s := range w.subscribers {
			subs = append(subs, s)
		}
		o.mu.Unlock()
		for _, s := range subs {
			s()
		}
	}
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	go w.informer.Run(w.stop)
	go func() {
		// A missing object produces no event: say when the first list is in.
		if cache.WaitForCacheSync(w.stop, w.informer.HasSynced) {
			notify()
		}
	}()
	return w
}

// get returns the object as last seen; synced is false until the first
// list is in (exists is meaningless until then).
func (o *objectWatches) get(ref objectRef) (obj any, exists, synced bool) {
	o.mu.Lock()
	w, ok := o.watches[ref]
	o.mu.Unlock()
	if !ok || !w.informer.HasSynced() {
		return nil, false, false
	}
	obj, exists, _ = w.informer.GetStore().GetByKey(ref.namespace + "/" + ref.name)
	return obj, exists, true
}

// stopAll ends every watch (the node is stopping).
func (o *objectWatches) stopAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for ref, w := range o.watches {
		close(w.stop)
		delete(o.watches, ref)
	}
}

// apiEnvSource reads what env refers to straight from the API server, as
// the kubelet does when it creates a container.
type apiEnvSource struct{ client kubernetes.Interface }

func (s apiEnvSource) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiEnvSource) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}
