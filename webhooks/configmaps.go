package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
)

// ConfigMapEnsurer makes the generated ConfigMaps a pod mounts exist before
// the pod is admitted. The ConfigMap workflow normally creates them when the
// workload appears; the pods of a new Deployment can be faster than that.
//
// A ConfigMap in the cache exists. Otherwise it is applied the way the
// ConfigMap workflow applies it (server-side apply, field manager flagplane,
// the same content, the last valid content of another namespace for an
// invalid flag set): the same write the workflow would make, only earlier.
// Concurrent pods of one workload make one write; a ConfigMap written in the
// last ten seconds is not written again while the cache catches up.
type ConfigMapEnsurer struct {
	cache    client.Reader
	client   client.Client
	live     client.Reader
	settings workflows.Settings

	group singleflight.Group
	mu    sync.Mutex
	done  map[client.ObjectKey]time.Time
}

// NewConfigMapEnsurer reads from cache and writes with c; live reads from the
// API server whether a ConfigMap of a generated name that the cache does not
// hold is flagplane's (it is never taken over otherwise); settings are the
// controllers' (how flag sets are validated, what generated objects carry).
func NewConfigMapEnsurer(cache client.Reader, c client.Client, live client.Reader, settings workflows.Settings) *ConfigMapEnsurer {
	return &ConfigMapEnsurer{cache: cache, client: c, live: live, settings: settings, done: map[client.ObjectKey]time.Time{}}
}

// errNoValidContent: the flag set was never valid, so there is nothing to write.
var errNoValidContent = errors.New("its flag set has no valid content yet")

const recentlyWritten = 10 * time.Second

// Exists tells whether the ConfigMap of key (a topology ConfigMap key) is in the cache.
func (e *ConfigMapEnsurer) Exists(ctx context.Context, key topology.Key) bool {
	return e.cache.Get(ctx, objectKeyOf(key), &corev1.ConfigMap{}) == nil
}

// Ensure returns nil once the ConfigMap of key exists or was just written.
func (e *ConfigMapEnsurer) Ensure(ctx context.Context, v *topology.View, key topology.Key) error {
	ok := objectKeyOf(key)
	if e.Exists(ctx, key) {
		return nil
	}
	e.mu.Lock()
	at, recent := e.done[ok]
	e.mu.Unlock()
	if recent && time.Since(at) < recentlyWritten {
		return nil
	}
	_, err, _ := e.group.Do(ok.String(), func() (any, error) {
		// The reconciler's logger names the ConfigMap, as the controllers' does.
		ctx := log.IntoContext(ctx, log.FromContext(ctx).WithValues(workflows.LogKey(key)))
		applied := false
		r := &configmaps.Reconciler{Client: e.client, Live: e.live, Settings: e.settings, Writes: func(verb string) {
			if verb == "apply" || verb == "create" {
				applied = true
			}
		}}
		if err := r.Reconcile(ctx, v, ok.Namespace, ok.Name); err != nil {
			return nil, err
		}
		if !applied {
			// The reconciler writes nothing when the cache has the ConfigMap
			// (it appeared meanwhile), when there is no valid content, or
			// when the content is more than a ConfigMap holds.
			if e.cache.Get(ctx, ok, &corev1.ConfigMap{}) == nil {
				return nil, nil
			}
			if r, served := v.FlagSetRendered(key.FlagSet()); served {
				if o, over := r.Overflow(string(v1beta1.SyncProviderFile)); over {
					return nil, errors.New(o.Message(key.FlagSet()))
				}
			}
			return nil, errNoValidContent
		}
		e.mu.Lock()
		e.done[ok] = time.Now()
		for k, t := range e.done {
			if time.Since(t) > recentlyWritten {
				delete(e.done, k)
			}
		}
		e.mu.Unlock()
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("ConfigMap %s: %w", ok, err)
	}
	return nil
}

func objectKeyOf(cm topology.Key) client.ObjectKey {
	return client.ObjectKey{Namespace: cm.Namespace, Name: topology.ConfigMapName(cm.FlagSet())}
}
