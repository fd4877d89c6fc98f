package topology

import (
	"maps"
	"reflect"
	"slices"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// A Flagd is a standalone flagd: a Deployment, a Service and, when asked,
// an Ingress and an HTTPRoute that flagplane generates from the Flagd and
// the FeatureFlagSource it names. In the graph it is a consumer of that
// source, as a workload is of the sources that target it:
//
//	Source ──serves──▶ Flagd ◀──mounts── ConfigMap
//
// The serves edge exists when the Flagd's reference to the source resolves:
// a source of the Flagd's namespace, or of another one whose grant permits
// kind Flagd (tenancy.go). The Flagd mounts a ConfigMap, in its own
// namespace, of every flag set its source resolves with the file provider.
// Its pods read flag sets with the kubernetes provider under the rule for
// workloads (View.MayReadDirectly), and its namespace is entitled to its
// source's flag sets (View.MayRead) as a targeted workload's is.
//
// What a Flagd's desired state reads (a Delta names the Flagds where
// it may have changed): its spec and annotations (the Service's, as in the
// OpenFeature Operator), the state of its source reference, the source's
// settings (everything but targetRefs and selector, and the annotations the
// injection reads), the source's resolved flag sets with their providers
// and, for the kubernetes provider, whether the Flagd may read them, and its
// ConfigMaps.

// KindFlagd is the node kind of a Flagd.
const KindFlagd Kind = "Flagd"

// FlagdKey is the key of a Flagd.
func FlagdKey(namespace, name string) Key {
	return Key{Kind: KindFlagd, Namespace: namespace, Name: name}
}

// flagdRec is what the topology keeps of a Flagd. Immutable once stored.
type flagdRec struct {
	obj *v1beta1.Flagd
	// source is the FeatureFlagSource spec.featureFlagSource names.
	source Key
	// state is whether that reference resolves; Resolved iff the serves edge exists.
	state RefState
}

// FlagdSourceKey is the FeatureFlagSource a Flagd names: `name` in its
// namespace, or `namespace/name`.
func FlagdSourceKey(f *v1beta1.Flagd) Key {
	return SourceKey(parseObjectRef(f.Spec.FeatureFlagSource, f.Namespace))
}

// FlagdChanged tells whether a Flagd update matters: its spec, its
// annotations (the generated Service's), or a new UID.
func FlagdChanged(old, new *v1beta1.Flagd) bool {
	return old.UID != new.UID || !reflect.DeepEqual(old.Spec, new.Spec) || !maps.Equal(old.Annotations, new.Annotations)
}

// flagdReferrer is how a grant names a Flagd referring to a source.
var flagdReferrer = []referrerKind{{GroupOpenFeature, v1beta1.FlagdKind}}

// flagdMayRef: the hop from a Flagd's spec.featureFlagSource to a source.
func (st *state) flagdMayRef(flagdNamespace string, source Key) bool {
	return st.permitted(flagdReferrer, flagdNamespace, source, false)
}

// flagdRefState decides a Flagd's reference to its source, as refState does
// a source's reference to a flag set.
func (st *state) flagdRefState(flagdNamespace string, source Key) RefState {
	if !st.flagdMayRef(flagdNamespace, source) {
		return RefNotPermitted
	}
	if n, ok := st.g.node(source); !ok || n.payload.source == nil {
		return RefNotFound
	}
	return RefResolved
}

// UpsertFlagd adds or updates a Flagd.
//
// The Delta: the Flagd, when it is new or what its desired state reads
// changed (see above); the ConfigMaps it starts or stops mounting and their
// flag sets; the sources whose denied referrers changed; the flag sets
// whose reader namespaces changed. Metadata other than annotations, and
// status, give an empty Delta.
//
// The topology keeps f: do not modify it afterwards.
func (t *Topology) UpsertFlagd(f *v1beta1.Flagd) (Delta, error) {
	return upsertObject(t, KindFlagd, f, (*tx).upsertFlagd)
}

// DeleteFlagd removes a Flagd. The Delta: the Flagd, the ConfigMaps no
// longer needed and their flag sets, the source whose denied referrers
// changed, the flag sets whose reader namespaces changed.
func (t *Topology) DeleteFlagd(namespace, name string) Delta {
	return deleteObject(t, Key{Kind: KindFlagd, Namespace: namespace, Name: name}, (*tx).deleteFlagd)
}

func (edit *tx) upsertFlagd(k Key, f *v1beta1.Flagd) error {
	source := FlagdSourceKey(f)
	n, exists := edit.state.g.node(k)
	if !exists {
		rec := &flagdRec{obj: f, source: source}
		if err := edit.state.g.addNode(edit.owner, k, layerWorkload, payload{flagd: rec}); err != nil {
			return err
		}
		indexAdd(edit.owner, &edit.state.flagdsByNs, nsKey(k.Namespace), k)
		edit.indexFlagd(k, Key{}, source)
		edit.mark(k)
		return edit.reevalFlagd(k)
	}
	old := n.payload.flagd
	next := *old
	next.obj = f
	edit.state.g.setPayload(edit.owner, k, payload{flagd: &next})
	if !FlagdChanged(old.obj, f) {
		return nil
	}
	edit.mark(k)
	if source == old.source {
		return nil
	}
	// Another source: the old reference goes as if the source had gone.
	denied := old.state == RefNotPermitted
	if err := edit.setFlagdState(k, RefNotFound); err != nil {
		return err
	}
	if denied && edit.state.g.has(old.source) {
		edit.mark(old.source) // it no longer denies this Flagd
	}
	edit.indexFlagd(k, old.source, source)
	next.source = source
	next.state = RefNotFound
	edit.state.g.setPayload(edit.owner, k, payload{flagd: &next})
	return edit.reevalFlagd(k)
}

func (edit *tx) deleteFlagd(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok || n.payload.flagd == nil {
		return nil
	}
	rec := n.payload.flagd
	if rec.state == RefNotPermitted && edit.state.g.has(rec.source) {
		edit.mark(rec.source)
	}
	if err := edit.setFlagdState(k, RefNotFound); err != nil {
		return err
	}
	mounts := edit.state.g.parents(k, relMounts)
	edit.indexFlagd(k, rec.source, Key{})
	edit.state.g.removeNode(edit.owner, k)
	indexDel(edit.owner, &edit.state.flagdsByNs, nsKey(k.Namespace), k)
	edit.mark(k)
	for _, cm := range mounts {
		if edit.state.g.countChildren(cm, relMounts) == 0 {
			edit.removeConfigMap(cm)
		}
	}
	return nil
}

// indexFlagd moves a Flagd's reference from source before to after (the
// zero Key: none) in the indexes.
func (edit *tx) indexFlagd(k, before, after Key) {
	if before != (Key{}) {
		indexDel(edit.owner, &edit.state.flagdsBySource, before, k)
		if before.Namespace != k.Namespace {
			indexDel(edit.owner, &edit.state.crossFlagdRefs, nsPair{to: before.Namespace, from: k.Namespace}, k)
		}
	}
	if after != (Key{}) {
		indexAdd(edit.owner, &edit.state.flagdsBySource, after, k)
		if after.Namespace != k.Namespace {
			indexAdd(edit.owner, &edit.state.crossFlagdRefs, nsPair{to: after.Namespace, from: k.Namespace}, k)
		}
	}
}

// reevalFlagd recomputes the state of a Flagd's source reference after the
// Flagd, its source or a grant changed, and marks what that changes.
func (edit *tx) reevalFlagd(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok || n.payload.flagd == nil {
		return nil
	}
	rec := n.payload.flagd
	state := edit.state.flagdRefState(k.Namespace, rec.source)
	if state == rec.state {
		return nil
	}
	// The source lists the Flagds it denies in its status.
	if (state == RefNotPermitted) != (rec.state == RefNotPermitted) && edit.state.g.has(rec.source) {
		edit.mark(rec.source)
	}
	return edit.setFlagdState(k, state)
}

// setFlagdState stores a new state of a Flagd's reference and brings the
// serves edge, the cross-namespace index, its ConfigMaps and the reader
// namespaces of its source's flag sets in line with it.
func (edit *tx) setFlagdState(k Key, state RefState) error {
	n, _ := edit.state.g.node(k)
	rec := n.payload.flagd
	if rec.state == state {
		return nil
	}
	had, has := rec.state == RefResolved, state == RefResolved
	next := *rec
	next.state = state
	edit.state.g.setPayload(edit.owner, k, payload{flagd: &next})
	edit.mark(k)
	if had == has {
		return nil
	}
	readers := edit.observeReaders(rec.source, k)
	if has {
		if _, err := edit.state.g.addEdge(edit.owner, rec.source, k, relServes); err != nil {
			return err
		}
	} else {
		edit.state.g.removeEdge(edit.owner, rec.source, k)
	}
	if rec.source.Namespace != k.Namespace {
		if has {
			indexAdd(edit.owner, &edit.state.crossTargets, rec.source, k)
		} else {
			indexDel(edit.owner, &edit.state.crossTargets, rec.source, k)
		}
	}
	edit.markReaders(readers)
	edit.remountLater(k)
	return nil
}

// flagdsWaitingFor re-evaluates the Flagds that name a source that has just
// been created or deleted.
func (edit *tx) flagdsWaitingFor(source Key) error {
	for _, f := range indexGet(edit.state.flagdsBySource, source) {
		if err := edit.reevalFlagd(f); err != nil {
			return err
		}
	}
	return nil
}

// regrantFlagds re-evaluates the references of Flagds of other namespaces
// to the sources of namespace, which a grant changing from before to after
// may permit or stop permitting.
func (edit *tx) regrantFlagds(namespace string, before, after *Grant) error {
	froms := map[string]bool{}
	for _, g := range []*Grant{before, after} {
		if g == nil {
			continue
		}
		for _, f := range g.From {
			if f.Group == GroupOpenFeature && f.Kind == v1beta1.FlagdKind && f.Namespace != namespace {
				froms[f.Namespace] = true
			}
		}
	}
	for _, from := range slices.Sorted(maps.Keys(froms)) {
		for _, f := range indexGet(edit.state.crossFlagdRefs, nsPair{to: namespace, from: from}) {
			if err := edit.reevalFlagd(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// consumerSources lists the sources whose flag sets a consumer (a workload
// or a Flagd) gets: those that target the workload, or that serve the Flagd.
func (st *state) consumerSources(w Key) []Key {
	if w.Kind == KindFlagd {
		return st.g.parents(w, relServes)
	}
	return st.g.parents(w, relTargets)
}

// deniedFlagds lists the Flagds of other namespaces whose reference to the
// source is not permitted.
func (st *state) deniedFlagds(source Key) []Key {
	var out []Key
	for _, f := range indexGet(st.flagdsBySource, source) {
		if n, ok := st.g.node(f); ok && n.payload.flagd.state == RefNotPermitted {
			out = append(out, f)
		}
	}
	return out
}

// Flagd returns a Flagd.
func (v *View) Flagd(k Key) (*v1beta1.Flagd, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.flagd == nil {
		return nil, false
	}
	return n.payload.flagd.obj, true
}

// Flagds lists the Flagds.
func (v *View) Flagds() []Key { return v.state.g.ofKind(KindFlagd) }

// FlagdSource returns the source a Flagd names and whether the reference
// resolves: NotPermitted across namespaces without a grant for kind Flagd
// (whether or not the source exists), NotFound when permitted but absent.
// ok is false when there is no such Flagd.
func (v *View) FlagdSource(k Key) (source Key, state RefState, ok bool) {
	n, found := v.state.g.node(k)
	if !found || n.payload.flagd == nil {
		return Key{}, "", false
	}
	return n.payload.flagd.source, n.payload.flagd.state, true
}

// FlagdsOfSource lists the Flagds a source serves: those whose reference
// to it resolves.
func (v *View) FlagdsOfSource(s Key) []Key { return sortedKeys(v.state.g.children(s, relServes)) }
