package controllers

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// edits remembers the last edit of each flag set: when its informer event
// arrived and the revision it renders to, and which of its generated
// ConfigMaps were seen holding it, so that each is timed once.
type edits struct {
	mu   sync.Mutex
	last map[topology.Key]*edit
}

type edit struct {
	at       time.Time
	revision string
	seen     map[string]bool // namespaces whose ConfigMap holds it
}

// edited records an edit of ff, now.
func (e *edits) edited(ff *v1beta1.FeatureFlag) {
	content, err := flagsets.Render(ff)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		e.last = map[topology.Key]*edit{}
	}
	e.last[topology.FlagSetKey(ff.Namespace, ff.Name)] = &edit{at: time.Now(), revision: flagsets.Revision(content), seen: map[string]bool{}}
}

// delivered tells, the first time a generated ConfigMap of flagSet is seen
// holding its last edit, how long that took.
func (e *edits) delivered(flagSet topology.Key, cm *corev1.ConfigMap) (time.Duration, bool) {
	held, ok := cm.Data[topology.ConfigMapDataKey(flagSet)]
	if !ok {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	last := e.last[flagSet]
	if last == nil || last.seen[cm.Namespace] || flagsets.Revision(held) != last.revision {
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
