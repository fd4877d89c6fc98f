package controllers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/status"
)

// deliveries lets the status of a flag set wait for the writes of its
// ConfigMaps that are on their way, so that an edit costs one status write
// that carries the new generation and its delivery together. A write is on
// its way while the ConfigMap's key is on the configmaps queue (waiting,
// being reconciled, or waiting for a retry) and, once written, until the
// informer brings the write's event (workflows.UnseenWrites). The wait
// ends by an event, never by a timer: the ConfigMap's informer event
// queues its flag set (configMapChanged), and a reconciliation that ends
// with nothing more on its way (no write was needed, or none could be
// made) queues it here.
type deliveries struct {
	queue  *workQueue[client.ObjectKey]
	unseen *workflows.UnseenWrites
	// cached is the resourceVersion of a ConfigMap in the cache ("" when
	// it holds none).
	cached func(client.ObjectKey) string
	// enqueue puts a flag set's key on the status queue.
	enqueue func(topology.Key)

	mu sync.Mutex
	// awaited are the ConfigMaps whose flag set's status waits for them,
	// and that flag set.
	awaited map[client.ObjectKey]topology.Key
}

var _ status.Deliveries = (*deliveries)(nil)

// track follows the writes of the ConfigMaps of queue, which unseen holds
// until the cache (cached) has them; enqueue queues a flag set's status.
func (d *deliveries) track(queue *workQueue[client.ObjectKey], unseen *workflows.UnseenWrites, cached func(client.ObjectKey) string,
	enqueue func(topology.Key)) {
	d.queue, d.unseen, d.cached, d.enqueue = queue, unseen, cached, enqueue
	queue.ended = d.ended
}

// Await implements status.Deliveries. The check and the record are made
// under one lock, which ended takes too, after the queue has counted the
// reconciliation out: a reconciliation ends either before the check (and
// nothing is awaited) or after the record (and ends the wait).
func (d *deliveries) Await(flagSet topology.Key, namespace string) bool {
	key := client.ObjectKey{Namespace: namespace, Name: topology.ConfigMapName(flagSet)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.onItsWay(key) {
		return false
	}
	if d.awaited == nil {
		d.awaited = map[client.ObjectKey]topology.Key{}
	}
	d.awaited[key] = flagSet
	return true
}

// ended is told of every reconciliation of a ConfigMap that ended, and of
// every informer event of one (seen). When nothing more of it is on its
// way, no later event will bring its flag set's status back: it is queued
// now.
func (d *deliveries) ended(key client.ObjectKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	flagSet, ok := d.awaited[key]
	if !ok || d.onItsWay(key) {
		return
	}
	delete(d.awaited, key)
	d.enqueue(flagSet)
}

// seen is told of every informer event of a generated ConfigMap: once
// nothing of it is on its way any more, the status that waited for it runs
// again (configMapChanged queues it too, for the events it acts on).
func (d *deliveries) seen(key client.ObjectKey, version string) {
	d.unseen.Seen(configMapRef(key), version)
	d.ended(key)
}

func (d *deliveries) onItsWay(key client.ObjectKey) bool {
	return d.queue.pending.has(key) || d.unseen.Unseen(configMapRef(key), d.cached(key))
}

// cachedConfigMapVersion is the resourceVersion of a generated ConfigMap
// in the cache, "" when it holds none. The cache's object is read, not
// copied: a flag set's ConfigMap may hold a megabyte.
func (c *Controller) cachedConfigMapVersion(key client.ObjectKey) string {
	cm := &corev1.ConfigMap{}
	if err := c.cache.Get(context.Background(), key, cm, client.UnsafeDisableDeepCopy); err != nil {
		return ""
	}
	return cm.ResourceVersion
}

func configMapRef(key client.ObjectKey) workflows.ObjectRef {
	return workflows.ObjectRef{Kind: "ConfigMap", Namespace: key.Namespace, Name: key.Name}
}
