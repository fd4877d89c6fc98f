package topology

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Topology is the live graph. Writers (the Upsert* and Delete* methods) are
// serialised by a mutex; readers take a Snapshot and never block writers.
//
// Every edit runs against a private copy-on-write version of the state and
// is published only when it succeeds, so a refused edit leaves no trace and a
// published version is never written again.
type Topology struct {
	mu   sync.Mutex
	last edit
	cur  atomic.Pointer[state]
}

// New returns an empty topology.
func New() *Topology {
	t := &Topology{}
	t.cur.Store(&state{})
	return t
}

// payload is what the typed layer keeps on a node; exactly one field is set,
// except on ConfigMap nodes, which carry nothing.
type payload struct {
	flagSet  *v1beta1.FeatureFlag
	source   *sourceRec
	ipc      *v1beta1.InProcessConfiguration
	workload *workloadRec
	grant    *Grant
}

// Initial layers of the graph's topological order: parents above children.
// With them every edge this schema makes respects the order as it is added.
const (
	layerSource = iota // sources, in-process configurations, grants
	layerFlagSet
	layerConfigMap
	layerWorkload
)

// state is one version of everything the topology knows. Copying the struct
// is a snapshot: all fields are persistent maps.
type state struct {
	g graph[payload]

	// cmByName maps a desired ConfigMap's namespace and object name to its key.
	cmByName pmap[cmName, Key]

	// The indexes below let an edit find what it affects without scanning.
	// They hold references whatever their target's existence, which makes
	// them the pending edges too: when an object appears, its index entry
	// lists who was waiting for it.

	// refsTo: flag set → sources with a spec.sources entry naming it.
	refsTo pmap[Key, pset[Key]]
	// crossRefs: (flag set namespace, source namespace) → sources with such a
	// cross-namespace reference, the sources a grant can affect.
	crossRefs pmap[nsPair, pset[Key]]
	// targetRefsTo: workload → sources naming it in spec.targetRefs.
	targetRefsTo pmap[Key, pset[Key]]
	// selByLabel: (namespace, label, value) → sources whose selector requires
	// that pair (the selector's first equality or set requirement).
	selByLabel pmap[labelKey, pset[Key]]
	// selScan: namespace → sources whose selector requires no specific pair
	// (empty, or only NotIn / Exists / DoesNotExist): matched against every
	// workload of the namespace.
	selScan pmap[nsKey, pset[Key]]
	// wlByLabel: (namespace, label, value) → workloads with that label.
	wlByLabel pmap[labelKey, pset[Key]]
	// wlByNs: namespace → workloads.
	wlByNs pmap[nsKey, pset[Key]]
	// annotSources and annotIPCs: source or in-process configuration →
	// workloads whose (enabled) pod-template annotation names it.
	annotSources pmap[Key, pset[Key]]
	annotIPCs    pmap[Key, pset[Key]]
	// grantsByNs: namespace → grants in it.
	grantsByNs pmap[nsKey, pset[Key]]
}

// tx is one edit in progress.
type tx struct {
	o edit
	// old is the published state the edit started from; st is being edited.
	old, st *state
	d       Delta
	// remount lists the workloads whose ConfigMaps may have changed. They
	// are recomputed once, when everything else of the edit is done, so that
	// a ConfigMap is never created and removed again within one edit.
	remount []Key
}

// apply runs one edit. On error the edit is dropped and the Delta is empty.
func (t *Topology) apply(fn func(*tx) error) (Delta, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	old := t.cur.Load()
	next := *old
	x := &tx{o: t.last, old: old, st: &next}
	if err := fn(x); err != nil {
		return Delta{}, err
	}
	if err := x.flushMounts(); err != nil {
		return Delta{}, err
	}
	t.cur.Store(&next)
	return x.d, nil
}

// mustApply runs an edit that only takes away: removing nodes and edges
// cannot close a cycle, so such an edit cannot fail, and the Delete methods
// return no error. A failure here is a bug in this package.
func (t *Topology) mustApply(k Key, fn func(*tx) error) Delta {
	d, err := t.apply(fn)
	if err != nil {
		panic(fmt.Sprintf("topology: deleting %s failed, which cannot happen: %v", k, err))
	}
	return d
}

// Snapshot returns a read-only view of the topology as of now. It costs O(1),
// holds no lock, and stays consistent however long it is used.
func (t *Topology) Snapshot() *View { return &View{st: t.cur.Load()} }

// DOT renders the current graph; it equals t.Snapshot().DOT().
func (t *Topology) DOT() []byte { return t.Snapshot().DOT() }

// Index helpers: an index maps a key to a set of node keys.

func indexAdd[K hashable](o edit, m *pmap[K, pset[Key]], k K, member Key) {
	s, _ := m.get(k)
	s.set(o, member, struct{}{})
	m.set(o, k, s)
}

func indexDel[K hashable](o edit, m *pmap[K, pset[Key]], k K, member Key) {
	s, ok := m.get(k)
	if !ok || !s.del(o, member) {
		return
	}
	if s.len() == 0 {
		m.del(o, k)
		return
	}
	m.set(o, k, s)
}

func indexGet[K hashable](m pmap[K, pset[Key]], k K) []Key {
	s, _ := m.get(k)
	return s.keys()
}

// indexUpdate moves member from the index keys it had to the ones it has.
func indexUpdate[K hashable](o edit, m *pmap[K, pset[Key]], before, after []K, member Key) {
	added, removed := diff(before, after)
	for _, k := range removed {
		indexDel(o, m, k, member)
	}
	for _, k := range added {
		indexAdd(o, m, k, member)
	}
}

// diff returns what is in after but not before, and the other way round.
// The lists are short (a source's refs, a workload's labels).
func diff[T comparable](before, after []T) (added, removed []T) {
	for _, a := range after {
		if !contains(before, a) && !contains(added, a) {
			added = append(added, a)
		}
	}
	for _, b := range before {
		if !contains(after, b) && !contains(removed, b) {
			removed = append(removed, b)
		}
	}
	return added, removed
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Delta bookkeeping: mark records that a node's desired state may have changed.

func (x *tx) mark(k Key) {
	switch {
	case k.Kind == KindFlagSet:
		x.d.FlagSets.Add(k)
	case k.Kind == KindSource:
		x.d.Sources.Add(k)
	case k.Kind == KindInProcessConfig:
		x.d.InProcessConfigs.Add(k)
	case k.Kind == KindConfigMap:
		x.d.ConfigMaps.Add(k)
	case k.Kind.IsWorkload():
		x.d.Workloads.Add(k)
	}
}

func (x *tx) markAll(keys []Key) {
	for _, k := range keys {
		x.mark(k)
	}
}
