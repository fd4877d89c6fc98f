package controllers

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// edits remembers the last edit of each flag set: when its informer event
// arrived and its object, and which of its generated ConfigMaps were seen
// holding its content, so that each is timed once.
type edits struct {
	mu   sync.Mutex
	last map[topology.Key]*edit
}

type edit struct {
	at   time.Time
	ff   *v1beta1.FeatureFlag
	seen map[string]bool // namespaces whose ConfigMap holds it
}

// edited records an edit of ff, now. Nothing is rendered here: the
// topology renders ff once when it takes it, and delivered reads that.
func (e *edits) edited(ff *v1beta1.FeatureFlag) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		e.last = map[topology.Key]*edit{}
	}
	e.last[topology.FlagSetKey(ff.Namespace, ff.Name)] = &edit{at: time.Now(), ff: ff, seen: map[string]bool{}}
}

// delivered tells, the first time a generated ConfigMap of flagSet is seen
// holding its last edit, how long that took. The edit's content is its
// rendering in v (topology.View.RenderedOf); a view that does not hold the
// edit yet has no content of it, and nothing is delivered.
func (e *edits) delivered(v *topology.View, flagSet topology.Key, cm *corev1.ConfigMap) (time.Duration, bool) {
	held, ok := cm.Data[topology.ConfigMapDataKey(flagSet)]
	if !ok {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	last := e.last[flagSet]
	if last == nil || last.seen[cm.Namespace] {
		return 0, false
	}
	if r, ok := v.RenderedOf(last.ff); !ok || r.Content == "" || held != r.Content {
		return 0, false
	}
	last.seen[cm.Namespace] = true
	return time.Since(last.at), true
}

// forget drops what is kept of a deleted flag set.
func (e *edits) forget(flagSet topology.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.last, flagSet)
}
