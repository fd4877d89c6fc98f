package topology

import (
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// sourceRec is what the topology keeps of a FeatureFlagSource: the object
// and what its spec means for the graph, parsed once per spec change.
// A sourceRec is immutable once stored; edits store a new one.
type sourceRec struct {
	obj *v1beta1.FeatureFlagSource
	// refs are the spec.sources entries that name a flag set, with their state.
	refs []FlagSetRef
	// targetRefs are the workloads of the source's namespace that spec.targetRefs names.
	targetRefs []Key
	// selector is spec.selector; it selects nothing when there is none or it
	// does not parse (the source's Accepted condition reports that).
	selector selectorRec
}

// newSourceRec parses a source; ref states are left for evalRefs.
func newSourceRec(s *v1beta1.FeatureFlagSource, def v1beta1.SyncProviderType) *sourceRec {
	rec := &sourceRec{obj: s, refs: parseRefs(s, def)}
	rec.targetRefs, rec.selector = parseTargeting(s)
	return rec
}

// parseRefs lists the spec.sources entries that name a flag set; def is
// the operator's default provider.
func parseRefs(s *v1beta1.FeatureFlagSource, def v1beta1.SyncProviderType) []FlagSetRef {
	var refs []FlagSetRef
	for i, e := range s.Spec.Sources {
		provider := ProviderInForce(e, s.Spec.DefaultSyncProvider, def)
		if !provider.ReferencesFlagSet() {
			continue
		}
		refs = append(refs, FlagSetRef{
			FlagSet:  FlagSetKey(parseObjectRef(e.Source, s.Namespace)),
			Provider: string(provider),
			Index:    i,
		})
	}
	return refs
}

// parseTargeting reads spec.targetRefs and spec.selector.
func parseTargeting(s *v1beta1.FeatureFlagSource) (targetRefs []Key, sel selectorRec) {
	for _, r := range s.Spec.TargetRefs {
		kind := OwnerKind(GroupApps, r.Kind)
		if (r.Group != "" && r.Group != GroupApps) || kind.IsPodOwner() || !kind.IsWorkload() {
			continue // refused by the CRD's validation; never matches
		}
		if k := WorkloadKey(kind, s.Namespace, r.Name); !slices.Contains(targetRefs, k) {
			targetRefs = append(targetRefs, k)
		}
	}
	if s.Spec.Selector != nil {
		if ls, err := metav1.LabelSelectorAsSelector(s.Spec.Selector); err == nil {
			sel = newSelectorRec(s.Namespace, ls)
		}
	}
	return targetRefs, sel
}

// ProviderInForce is the provider of a spec.sources entry: its own, else
// its source's defaultSyncProvider, else the operator's default
// (View.DefaultSyncProvider), else file.
func ProviderInForce(e v1beta1.Source, sourceDefault, operatorDefault v1beta1.SyncProviderType) v1beta1.SyncProviderType {
	switch {
	case e.Provider != "":
		return e.Provider
	case sourceDefault != "":
		return sourceDefault
	case operatorDefault != "":
		return operatorDefault
	}
	return v1beta1.SyncProviderFile
}

// resolvedFlagSets lists, once each, the flag sets of the Resolved refs whose
// provider is provider, or of any provider when provider is "".
func resolvedFlagSets(refs []FlagSetRef, provider v1beta1.SyncProviderType) []Key {
	var out []Key
	for _, r := range refs {
		if r.State == RefResolved && (provider == "" || r.Provider == string(provider)) && !slices.Contains(out, r.FlagSet) {
			out = append(out, r.FlagSet)
		}
	}
	return out
}

func refFlagSets(refs []FlagSetRef) []Key {
	out := make([]Key, 0, len(refs))
	for _, r := range refs {
		if !slices.Contains(out, r.FlagSet) {
			out = append(out, r.FlagSet)
		}
	}
	return out
}

// crossNamespacePairs lists the (flag set namespace, source namespace) pairs
// of refs that leave the source's namespace.
func crossNamespacePairs(namespace string, refs []FlagSetRef) []nsPair {
	var out []nsPair
	for _, r := range refs {
		if pair := (nsPair{to: r.FlagSet.Namespace, from: namespace}); r.FlagSet.Namespace != namespace && !slices.Contains(out, pair) {
			out = append(out, pair)
		}
	}
	return out
}

// refState decides a reference from a source in namespace from to flag set
// f. Like Gateway API, a reference across namespaces that no grant permits is
// NotPermitted whether or not the flag set exists, so that status does not
// tell other namespaces what exists.
func (st *state) refState(from string, f Key) RefState {
	if !st.sourceMayRef(from, f) {
		return RefNotPermitted
	}
	if n, ok := st.g.node(f); !ok || n.payload.flagSet == nil {
		return RefNotFound
	}
	return RefResolved
}

// evalRefs returns refs with their states as of the current state.
func (st *state) evalRefs(namespace string, refs []FlagSetRef) []FlagSetRef {
	out := slices.Clone(refs)
	for i := range out {
		out[i].State = st.refState(namespace, out[i].FlagSet)
	}
	return out
}

// UpsertSource adds or updates a FeatureFlagSource.
//
// The Delta, when the spec changed: the source; its workloads when a
// setting of the sidecar changed (anything but targetRefs and selector, or
// an annotation the injection reads);
// workloads it gained or lost; ConfigMaps created or no longer needed; flag
// sets whose resolved sources or consumer namespaces changed. Metadata and
// status changes give an empty Delta, except a new UID (the source was
// recreated between two observations), which names the source.
//
// The topology keeps s: do not modify it afterwards (objects from an
// informer's cache are never modified).
func (t *Topology) UpsertSource(s *v1beta1.FeatureFlagSource) (Delta, error) {
	return upsertObject(t, KindSource, s, (*tx).upsertSource)
}

// DeleteSource removes a FeatureFlagSource. The Delta: the source, its
// workloads, the flag sets it resolved, ConfigMaps no longer needed.
func (t *Topology) DeleteSource(namespace, name string) Delta {
	return deleteObject(t, Key{Kind: KindSource, Namespace: namespace, Name: name}, (*tx).deleteSource)
}

func (edit *tx) upsertSource(k Key, obj *v1beta1.FeatureFlagSource) error {
	old := &sourceRec{}
	n, exists := edit.state.g.node(k)
	if exists {
		old = n.payload.source
	}
	sidecarSame := exists && sidecarSpecEqual(old.obj.Spec, obj.Spec) && sourceAnnotationsEqual(old.obj, obj)
	targetingSame := exists && targetingEqual(old.obj.Spec, obj.Spec)
	refsSame := exists && refsSpecEqual(old.obj.Spec, obj.Spec)

	// Reuse what did not change: the refs keep their states, the selector
	// its index entries.
	rec := &sourceRec{obj: obj, refs: old.refs, targetRefs: old.targetRefs, selector: old.selector}
	if !refsSame {
		rec.refs = edit.state.evalRefs(k.Namespace, parseRefs(obj, edit.state.defaultProvider))
		indexUpdate(edit.owner, &edit.state.refsTo, refFlagSets(old.refs), refFlagSets(rec.refs), k)
		indexUpdate(edit.owner, &edit.state.crossRefs, crossNamespacePairs(k.Namespace, old.refs), crossNamespacePairs(k.Namespace, rec.refs), k)
		indexUpdate(edit.owner, &edit.state.kubeRefsInto, kubernetesRefNamespaces(old.refs), kubernetesRefNamespaces(rec.refs), k)
	}
	if !targetingSame {
		rec.targetRefs, rec.selector = parseTargeting(obj)
		indexUpdate(edit.owner, &edit.state.targetRefsTo, old.targetRefs, rec.targetRefs, k)
		indexUpdate(edit.owner, &edit.state.selByLabel, old.selector.index, rec.selector.index, k)
		indexUpdate(edit.owner, &edit.state.selScan, old.selector.scan(), rec.selector.scan(), k)
	}
	if exists {
		edit.state.g.setPayload(edit.owner, k, payload{source: rec})
	} else {
		if err := edit.state.g.addNode(edit.owner, k, layerSource, payload{source: rec}); err != nil {
			return err
		}
		if err := edit.flagdsWaitingFor(k); err != nil {
			return err
		}
	}
	if exists && old.obj.UID != obj.UID {
		edit.mark(k) // recreated between two observations: its status is new
	}
	if sidecarSame && targetingSame {
		return nil // metadata or status: nothing the graph or a sidecar reads
	}
	edit.mark(k)
	if !refsSame {
		if err := edit.refsChanged(k, old.refs, rec.refs); err != nil {
			return err
		}
	}
	if !targetingSame {
		candidates := edit.state.g.children(k, relTargets)
		for _, w := range rec.targetRefs {
			if edit.state.g.has(w) {
				candidates = append(candidates, w)
			}
		}
		candidates = append(candidates, edit.state.selectorCandidates(rec.selector)...)
		candidates = append(candidates, indexGet(edit.state.annotSources, k)...)
		referrer := payload{source: rec}
		for _, w := range candidates {
			if err := edit.retarget(k, referrer, w); err != nil {
				return err
			}
		}
	}
	if !sidecarSame {
		edit.markAll(edit.state.g.children(k, relTargets))
		edit.markAll(edit.state.g.children(k, relServes))
	}
	return nil
}

// Specs are compared with reflect.DeepEqual rather than apimachinery's
// semantic equality, which costs several times more. Where the two differ
// (an empty list against none, a quantity written two ways) objects from
// the same informer are written the same way, and at worst an edit that
// changed nothing is reported: never the other way round.

// sidecarSpecEqual compares two specs but for what only chooses the targets.
func sidecarSpecEqual(a, b v1beta1.FeatureFlagSourceSpec) bool {
	a.TargetRefs, b.TargetRefs = nil, nil
	a.Selector, b.Selector = nil, nil
	return reflect.DeepEqual(a, b)
}

// sourceAnnotationsRead are the annotations of a source that its workloads'
// injection reads.
var sourceAnnotationsRead = []string{v1beta1.AnnotationSidecarSecurityContext}

func sourceAnnotationsEqual(a, b *v1beta1.FeatureFlagSource) bool {
	for _, k := range sourceAnnotationsRead {
		if a.Annotations[k] != b.Annotations[k] {
			return false
		}
	}
	return true
}

// refsSpecEqual compares what decides the refs of two specs.
func refsSpecEqual(a, b v1beta1.FeatureFlagSourceSpec) bool {
	return a.DefaultSyncProvider == b.DefaultSyncProvider && reflect.DeepEqual(a.Sources, b.Sources)
}

// targetingEqual compares what chooses the targets of two specs.
func targetingEqual(a, b v1beta1.FeatureFlagSourceSpec) bool {
	return reflect.DeepEqual(a.TargetRefs, b.TargetRefs) && reflect.DeepEqual(a.Selector, b.Selector)
}

func (edit *tx) deleteSource(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok {
		return nil
	}
	rec := n.payload.source
	indexUpdate(edit.owner, &edit.state.refsTo, refFlagSets(rec.refs), nil, k)
	indexUpdate(edit.owner, &edit.state.crossRefs, crossNamespacePairs(k.Namespace, rec.refs), nil, k)
	indexUpdate(edit.owner, &edit.state.kubeRefsInto, kubernetesRefNamespaces(rec.refs), nil, k)
	indexUpdate(edit.owner, &edit.state.targetRefsTo, rec.targetRefs, nil, k)
	indexUpdate(edit.owner, &edit.state.selByLabel, rec.selector.index, nil, k)
	indexUpdate(edit.owner, &edit.state.selScan, rec.selector.scan(), nil, k)
	targets := edit.state.g.children(k, relTargets)
	edit.markAll(resolvedFlagSets(rec.refs, ""))
	edit.state.crossTargets.del(edit.owner, k)
	edit.state.g.removeNode(edit.owner, k)
	edit.mark(k)
	for _, w := range targets {
		edit.mark(w)
		edit.remountLater(w)
	}
	return edit.flagdsWaitingFor(k)
}

// reevalRefs recomputes the states of a source's refs after a flag set or a
// grant changed.
func (edit *tx) reevalRefs(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok {
		return nil
	}
	rec := n.payload.source
	refs := edit.state.evalRefs(k.Namespace, rec.refs)
	if slices.Equal(refs, rec.refs) {
		return nil
	}
	next := *rec
	next.refs = refs
	edit.state.g.setPayload(edit.owner, k, payload{source: &next})
	edit.mark(k)
	return edit.refsChanged(k, rec.refs, refs)
}

// refsChanged brings the source's refs edges, its workloads and their
// ConfigMaps in line with a change of its refs from before to after.
func (edit *tx) refsChanged(k Key, before, after []FlagSetRef) error {
	added, removed := diff(resolvedFlagSets(before, ""), resolvedFlagSets(after, ""))
	for _, f := range added {
		if _, err := edit.state.g.addEdge(edit.owner, k, f, relRefs); err != nil {
			return err
		}
		edit.mark(f)
	}
	for _, f := range removed {
		edit.state.g.removeEdge(edit.owner, k, f)
		edit.mark(f)
	}
	fileAdded, fileRemoved := diff(resolvedFlagSets(before, v1beta1.SyncProviderFile), resolvedFlagSets(after, v1beta1.SyncProviderFile))
	if len(added)+len(removed)+len(fileAdded)+len(fileRemoved) == 0 {
		return nil
	}
	// The sidecar of every workload, and every Flagd, reads the resolved refs.
	for _, w := range append(edit.state.g.children(k, relTargets), edit.state.g.children(k, relServes)...) {
		edit.mark(w)
		if len(fileAdded)+len(fileRemoved) > 0 {
			edit.remountLater(w)
		}
	}
	return nil
}

// retarget adds or removes the edge from a source or in-process
// configuration (key from, payload referrer) to a workload, as their records now say.
func (edit *tx) retarget(from Key, referrer payload, w Key) error {
	wn, ok := edit.state.g.node(w)
	if !ok {
		return nil
	}
	var want bool
	switch {
	case referrer.source != nil:
		want = edit.state.targets(from, referrer.source, wn.payload.workload)
	case referrer.ipc != nil:
		want = slices.Contains(wn.payload.workload.annotIPCs, from) && edit.state.workloadMayRef(w, from)
	}
	if _, have := wn.in.get(from); want == have {
		return nil
	}
	readers := edit.observeReaders(from, w)
	if want {
		if _, err := edit.state.g.addEdge(edit.owner, from, w, relTargets); err != nil {
			return err
		}
	} else {
		edit.state.g.removeEdge(edit.owner, from, w)
	}
	if from.Kind == KindSource && from.Namespace != w.Namespace {
		if want {
			indexAdd(edit.owner, &edit.state.crossTargets, from, w)
		} else {
			indexDel(edit.owner, &edit.state.crossTargets, from, w)
		}
	}
	edit.markReaders(readers)
	edit.mark(from)
	edit.mark(w)
	edit.markSelected(from, w)
	if from.Kind == KindSource {
		edit.remountLater(w)
	}
	return nil
}

// retargetKey is retarget for a from that may not exist yet.
func (edit *tx) retargetKey(from, w Key) error {
	n, ok := edit.state.g.node(from)
	if !ok {
		return nil
	}
	return edit.retarget(from, n.payload, w)
}

// targets tells whether the source (whose key is k) applies to the workload:
// by targetRefs or selector in its own namespace, or because the workload's
// annotation names it and the tenancy rule permits that.
func (st *state) targets(k Key, s *sourceRec, w *workloadRec) bool {
	if k.Namespace == w.w.Namespace {
		if slices.Contains(s.targetRefs, w.w.Key()) || s.selector.matches(w.w.Labels) {
			return true
		}
	}
	return slices.Contains(w.annotSources, k) && st.workloadMayRef(w.w.Key(), k)
}

// observeReaders takes, before the edge from a source to a workload of
// another namespace comes or goes, the reader namespaces of the flag sets
// the source resolves: such an edge is how a namespace becomes entitled to
// another's flag sets (View.MayRead), and the sync server re-checks the
// subscribers of a flag set in the Delta.
func (edit *tx) observeReaders(from, w Key) map[Key][]string {
	if from.Kind != KindSource || from.Namespace == w.Namespace {
		return nil
	}
	n, ok := edit.state.g.node(from)
	if !ok || n.payload.source == nil {
		return nil
	}
	out := map[Key][]string{}
	for _, f := range resolvedFlagSets(n.payload.source.refs, "") {
		out[f] = edit.state.readerNamespaces(f)
	}
	return out
}

// markReaders marks the flag sets whose reader namespaces differ from what
// observeReaders saw.
func (edit *tx) markReaders(before map[Key][]string) {
	// A flag set's own namespace may read it whatever sources resolve it
	// (View.MayRead): its coming or going changes nothing.
	others := func(f Key, namespaces []string) []string {
		return slices.DeleteFunc(slices.Clone(namespaces), func(ns string) bool { return ns == f.Namespace })
	}
	for f, namespaces := range before {
		if !slices.Equal(others(f, namespaces), others(f, edit.state.readerNamespaces(f))) {
			edit.mark(f)
		}
	}
}
