package status

import (
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// Copies is what the copies of a flag set in one namespace hold, as
// flagplane observes them: its generated ConfigMap (when the namespace
// needs one) and the sync server's streams to the namespace. It is the one
// answer to "what does this consumer serve": the flag set's delivery
// status (delivery) and the staged rollouts (staging.Reconciler) both
// read it.
type Copies struct {
	Namespace string
	// ConfigMap says that the namespace needs a generated ConfigMap of
	// the flag set; ConfigMapHeld, that the ConfigMap exists and holds a
	// copy, of ConfigMapRevision.
	ConfigMap         bool
	ConfigMapHeld     bool
	ConfigMapRevision string
	// Sync are the sync server's streams of the flag set to the
	// namespace, by revision (nil: none).
	Sync *SyncSubscribers
}

// Held is the revision every copy holds: "" when they differ, when one
// holds nothing yet, or when there is no copy.
func (c Copies) Held() string {
	var held []string
	if c.ConfigMap {
		if !c.ConfigMapHeld {
			return ""
		}
		held = append(held, c.ConfigMapRevision)
	}
	if c.Sync != nil {
		for _, h := range c.Sync.Held {
			held = append(held, h.Revision)
		}
	}
	if len(held) == 0 {
		return ""
	}
	for _, h := range held[1:] {
		if h != held[0] {
			return ""
		}
	}
	return held[0]
}

// CopiesReader reads the Copies of one flag set, namespace by namespace.
type CopiesReader struct {
	c    topology.Consumers
	obs  Observed
	sync map[string]*SyncSubscribers
}

// CopiesOf reads what the copies of a flag set hold, against what its
// consumers are to hold (topology.View.ConsumersOf), from obs (the
// generated ConfigMaps as the cache holds them; the sync server's streams
// when obs is a SyncObserved).
func CopiesOf(c topology.Consumers, obs Observed) *CopiesReader {
	r := &CopiesReader{c: c, obs: obs, sync: map[string]*SyncSubscribers{}}
	if so, ok := obs.(SyncObserved); ok {
		for _, subs := range so.SyncSubscribers(c.FlagSet) {
			if subs.Streams() > 0 {
				r.sync[subs.Namespace] = &subs
			}
		}
	}
	return r
}

// In is what the copies in namespace hold. A ConfigMap's content is read
// only when it is not the content its namespace is to serve
// (topology.CopyPlan.Served), which is the common case compared instead.
func (r *CopiesReader) In(namespace string) Copies {
	c := Copies{Namespace: namespace, Sync: r.sync[namespace]}
	planned := copyPlan(r.c, namespace)
	if !planned.ConfigMap {
		return c
	}
	c.ConfigMap = true
	data, ok := r.obs.ConfigMapData(namespace, r.c.ConfigMapName)
	if !ok {
		return c
	}
	held, ok := data[r.c.ConfigMapDataKey]
	if !ok {
		return c
	}
	c.ConfigMapHeld = true
	if s := planned.Served; r.c.InGraph && !s.Held && s.Content == held {
		c.ConfigMapRevision = s.Revision
	} else {
		c.ConfigMapRevision = heldRevision(r.c, held)
	}
	return c
}

// copyPlan is what the copies of a flag set in namespace are to hold.
func copyPlan(c topology.Consumers, namespace string) topology.CopyPlan {
	if p, ok := c.Copies[namespace]; ok {
		return p
	}
	return c.Elsewhere
}

// heldRevision is the revision of content a ConfigMap of a flag set holds:
// the revision it names, once shown (flagsets.RevisionOfServed, or the
// graph rendering that revision to exactly this content); else its hash,
// which is the revision of content written before revisions were served
// in it and matches nothing else (content edited by hand).
func heldRevision(c topology.Consumers, held string) string {
	f := c.FlagSet
	if r := flagsets.RevisionOfServed(held, f.Namespace, f.Name); r != "" {
		return r
	}
	if claimed := flagsets.ServedRevision(held); claimed != "" {
		if rendered, ok := c.Recorded(claimed); ok && rendered.Content == held {
			return rendered.Revision
		}
	}
	return flagsets.Revision(held)
}
