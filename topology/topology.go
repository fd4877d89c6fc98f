package topology

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/samber/lo"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// Topology is the live graph. Writers (the Upsert* and Delete* methods) are
// serialised by a mutex; readers work on Snapshots.
//
// Edits change the state in place until a Snapshot shares it; the first edit
// after that works on a copy-on-write version, which copies only the trie
// paths it touches (see pmap). So an edit costs what a mutable map would
// when nobody reads, and O(log n) more per touched entry when somebody does.
type Topology struct {
	mu    sync.Mutex
	state *state
	// token owns the state's nodes written since the last Snapshot.
	token token
	// shared says that a View holds state, so the next edit must not write it.
	shared bool
	// whatIf marks a copy made to see an edit before it happens
	// (View.WithSource, View.WithFlagSet): its edits change the state alike
	// but compute no Delta, which nobody reads.
	whatIf bool
}

// lastToken hands out ownership tokens process-wide, so that no two
// topologies ever share one: a state handed from one Topology to another can
// never be written in place by the wrong one.
var lastToken atomic.Uint64

func newToken() token { return token(lastToken.Add(1)) }

// New returns an empty topology.
func New(opts ...Option) *Topology {
	initial := &state{}
	for _, opt := range opts {
		opt(initial)
	}
	return &Topology{state: initial, token: newToken()}
}

// Option configures a Topology at construction; it never changes after.
type Option func(*state)

// WithDefaultSyncProvider sets the provider of a spec.sources entry that
// names none when its source has no defaultSyncProvider either: the
// operator-wide default (the manager's --sidecar-sync-provider, the
// OpenFeature Operator's sidecarConfiguration.defaultSyncProvider). Without
// it, and for "", it is file.
func WithDefaultSyncProvider(provider v1beta1.SyncProviderType) Option {
	return func(st *state) {
		if provider != "" {
			st.defaultProvider = provider
		}
	}
}

// payload is what the typed layer keeps on a node; exactly one field is set,
// except on ConfigMap nodes, which carry nothing.
type payload struct {
	flagSet *v1beta1.FeatureFlag
	// rendered is what flagSet serves (rendered.go); set with it.
	rendered *Rendered
	source   *sourceRec
	ipc      *v1beta1.InProcessConfiguration
	workload *workloadRec
	grant    *Grant
	flagd    *flagdRec
	policy   *policyv1alpha1.FeatureFlagSourcePolicy
	rollout  *deliveryv1alpha1.FeatureFlagRolloutPolicy
}

// Layers of the graph: every edge goes from a lower layer to a higher one
// (parents above children), which keeps the graph acyclic; the graph
// refuses any other edge.
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

	// defaultProvider is the provider of an entry that names none and whose
	// source has no defaultSyncProvider (WithDefaultSyncProvider); "" is
	// file. It is set once, at New.
	defaultProvider v1beta1.SyncProviderType
	// renderFlagSet renders a flag set (WithFlagSetRendering).
	renderFlagSet func(*v1beta1.FeatureFlag) Rendered

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
	// ipcsSelecting: flag set → in-process configurations whose selector
	// names it (the in-process SDKs that read it, View.InProcessReaders).
	ipcsSelecting pmap[Key, pset[Key]]
	// grantsByNs: namespace → grants in it.
	grantsByNs pmap[nsKey, pset[Key]]
	// crossAnnot: (target namespace, workload namespace) → workloads whose
	// annotation names a source or in-process configuration of another
	// namespace, the workloads a grant can affect.
	crossAnnot pmap[nsPair, pset[Key]]
	// kubeRefsInto: namespace → sources with a kubernetes-provider reference
	// to a flag set of that namespace, whose workloads a grant can let read it.
	kubeRefsInto pmap[nsKey, pset[Key]]
	// crossTargets: source → the workloads of other namespaces it targets
	// (through their annotations, with a grant): the namespaces besides its
	// own that are entitled to its flag sets.
	crossTargets pmap[Key, pset[Key]]
	// flagdsBySource: source → Flagds whose spec.featureFlagSource names it.
	flagdsBySource pmap[Key, pset[Key]]
	// crossFlagdRefs: (source namespace, Flagd namespace) → Flagds naming a
	// source of another namespace, the Flagds a grant can affect.
	crossFlagdRefs pmap[nsPair, pset[Key]]
	// flagdsByNs: namespace → Flagds in it.
	flagdsByNs pmap[nsKey, pset[Key]]
	// rolloutsByFlagSet: flag set → FeatureFlagRolloutPolicies targeting it.
	rolloutsByFlagSet pmap[Key, pset[Key]]
	// plans: staged flag set → its rollout plan, computed once per edit
	// (updatePlans, rebuilds and what-ifs included) and read by every
	// reader of the plan (View.RolloutPlan), as a flag set's rendering is.
	plans pmap[Key, *RolloutPlan]
	// planReaders: workload or Flagd → staged flag sets whose plan names
	// it (RolloutPlan.readers), for the edit that changes it.
	planReaders pmap[Key, pset[Key]]
	// revisions: the recorded revisions of flag sets (revisions.go), which
	// are not nodes.
	revisions pmap[revKey, *revisionRec]
	// nsLabels: namespace → its labels (namespaces.go).
	nsLabels pmap[nsKey, map[string]string]
	// policiesByNs: namespace → FeatureFlagSourcePolicies in it.
	policiesByNs pmap[nsKey, pset[Key]]
}

// tx is one edit in progress.
type tx struct {
	owner token
	state *state
	delta Delta
	// remount lists the workloads whose ConfigMaps may have changed. They
	// are recomputed once, when everything else of the edit is done, so that
	// a ConfigMap is never created and removed again within one edit.
	remount []Key
	// noDelta: the edit is a what-if's, the Delta is not kept.
	noDelta bool
}

// apply runs one edit of the object k. If the edit fails, the state is
// rebuilt from its objects with k as it was, so that a refused edit leaves
// no trace, and the Delta is empty.
//
// Edits fail only when the graph refuses an edge against its layers, which
// this schema cannot produce (its edges run from sources to flag sets to
// ConfigMaps to workloads): only a bug of this package could, and the
// rebuild then keeps the topology consistent (TestFailedEditLeavesNoTrace).
func (t *Topology) apply(k Key, fn func(*tx) error) (Delta, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shared {
		next := *t.state
		t.state = &next
		t.token = newToken()
		t.shared = false
	}
	prior, existed := t.state.g.node(k)
	var before payload
	if existed {
		before = prior.payload
	}
	edit := &tx{owner: t.token, state: t.state, noDelta: t.whatIf}
	err := fn(edit)
	if err == nil {
		err = edit.flushMounts()
	}
	if err != nil {
		t.token = newToken()
		t.state = t.state.rebuilt(t.token, k, before, existed)
		return Delta{}, err
	}
	if edit.noDelta {
		edit.updatePlans(k, true)
		return Delta{}, nil
	}
	edit.markSourcesOfWorkloads()
	edit.markPoliciesOfConsumers()
	edit.markPlansOfConsumers()
	edit.updatePlans(k, false)
	return edit.delta, nil
}

// object is a namespaced API object of the graph, as its typed pointer.
type object interface {
	comparable
	GetNamespace() string
	GetName() string
}

// upsertObject is every Upsert of an API object: it refuses a nil object or
// one without a namespace or name, and runs upsert as the one edit of the
// object's key.
func upsertObject[T object](t *Topology, kind Kind, obj T, upsert func(*tx, Key, T) error) (Delta, error) {
	var none T
	if obj == none {
		return Delta{}, fmt.Errorf("upserting %s: nil object", kind)
	}
	if obj.GetNamespace() == "" || obj.GetName() == "" {
		return Delta{}, fmt.Errorf("upserting %s %q in namespace %q: namespace and name are required", kind, obj.GetName(), obj.GetNamespace())
	}
	k := Key{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	d, err := t.apply(k, func(edit *tx) error { return upsert(edit, k, obj) })
	if err != nil {
		return d, fmt.Errorf("upserting %s %s: %w", kind, k, err)
	}
	return d, nil
}

// deleteObject is every Delete of an API object: the one edit of its key.
func deleteObject(t *Topology, k Key, del func(*tx, Key) error) Delta {
	return t.mustApply(k, func(edit *tx) error { return del(edit, k) })
}

// mustApply runs an edit that only takes away: removing nodes and edges
// cannot close a cycle, so such an edit cannot fail, and the Delete methods
// return no error. A failure here is a bug in this package.
func (t *Topology) mustApply(k Key, fn func(*tx) error) Delta {
	d, err := t.apply(k, fn)
	if err != nil {
		panic(fmt.Sprintf("topology: deleting %s failed, which cannot happen: %v", k, err))
	}
	return d
}

// rebuilt builds a new state from the objects of st, with the object k as
// the payload before says (absent when existed is false).
func (st *state) rebuilt(owner token, k Key, before payload, existed bool) *state {
	var objects []payload
	for key, n := range st.g.nodes.all() {
		if key != k && n.payload != (payload{}) {
			objects = append(objects, n.payload)
		}
	}
	if existed {
		objects = append(objects, before)
	}
	// Revisions and namespace labels are not nodes: they are kept as they are.
	edit := &tx{owner: owner, state: &state{defaultProvider: st.defaultProvider, renderFlagSet: st.renderFlagSet,
		revisions: st.revisions, nsLabels: st.nsLabels}}
	for _, object := range objects {
		var err error
		switch {
		case object.flagSet != nil:
			err = edit.upsertFlagSet(FlagSetKey(object.flagSet.Namespace, object.flagSet.Name), object.flagSet)
		case object.source != nil:
			err = edit.upsertSource(SourceKey(object.source.obj.Namespace, object.source.obj.Name), object.source.obj)
		case object.ipc != nil:
			err = edit.upsertIPC(InProcessConfigKey(object.ipc.Namespace, object.ipc.Name), object.ipc)
		case object.workload != nil:
			err = edit.upsertWorkload(object.workload)
		case object.grant != nil:
			err = edit.upsertGrant(object.grant)
		case object.flagd != nil:
			err = edit.upsertFlagd(FlagdKey(object.flagd.obj.Namespace, object.flagd.obj.Name), object.flagd.obj)
		case object.policy != nil:
			err = edit.upsertSourcePolicy(SourcePolicyKey(object.policy.Namespace, object.policy.Name), object.policy)
		case object.rollout != nil:
			err = edit.upsertRolloutPolicy(RolloutPolicyKey(object.rollout.Namespace, object.rollout.Name), object.rollout)
		}
		if err == nil {
			err = edit.flushMounts()
		}
		if err != nil {
			panic(fmt.Sprintf("topology: rebuilding after a failed edit of %s: %v", k, err))
		}
	}
	edit.updatePlans(k, true)
	return edit.state
}

// Snapshot returns a read-only view of the topology as of now. It costs O(1)
// (it waits at most for the edit in progress) and the View stays consistent
// however long it is used: the edits that follow copy what they change.
func (t *Topology) Snapshot() *View {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.shared = true
	return &View{state: t.state}
}

// DOT renders the current graph; it equals t.Snapshot().DOT().
func (t *Topology) DOT() []byte { return t.Snapshot().DOT() }

// Index helpers: an index maps a key to a set of node keys.

func indexAdd[K hashable](owner token, m *pmap[K, pset[Key]], k K, member Key) {
	s, _ := m.get(k)
	s.set(owner, member, struct{}{})
	m.set(owner, k, s)
}

func indexDel[K hashable](owner token, m *pmap[K, pset[Key]], k K, member Key) {
	s, ok := m.get(k)
	if !ok || !s.del(owner, member) {
		return
	}
	if s.len() == 0 {
		m.del(owner, k)
		return
	}
	m.set(owner, k, s)
}

func indexGet[K hashable](m pmap[K, pset[Key]], k K) []Key {
	s, _ := m.get(k)
	return s.keys()
}

// indexUpdate moves member from the index keys it had to the ones it has.
func indexUpdate[K hashable](owner token, m *pmap[K, pset[Key]], before, after []K, member Key) {
	added, removed := diff(before, after)
	for _, k := range removed {
		indexDel(owner, m, k, member)
	}
	for _, k := range added {
		indexAdd(owner, m, k, member)
	}
}

// diff returns what is in after but not before, and the other way round,
// each without repeats.
func diff[T comparable](before, after []T) (added, removed []T) {
	return lo.Difference(lo.Uniq(after), lo.Uniq(before))
}

// Delta bookkeeping: mark records that a node's desired state may have changed.

func (edit *tx) mark(k Key) {
	// A grant has no output of its own: what it permits is marked by the
	// edit that reads it.
	if edit.noDelta || k.Kind == KindGrant {
		return
	}
	edit.delta.Add(k)
}

func (edit *tx) markAll(keys []Key) {
	for _, k := range keys {
		edit.mark(k)
	}
}

// markSourcesOfWorkloads marks, at the end of an edit, the sources of every
// workload whose injection changed: a source's status reads its workloads'
// injections (the settings it loses to other sources, whether everything it
// asks for is in place).
func (edit *tx) markSourcesOfWorkloads() {
	for _, w := range edit.delta.filter(func(k Key) bool { return k.Kind.IsWorkload() }) {
		for _, s := range edit.state.g.parents(w, relTargets) {
			if s.Kind == KindSource {
				edit.mark(s)
			}
		}
	}
}
