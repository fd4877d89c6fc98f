package topology

import (
	"cmp"
	"slices"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The tenancy rule, in one place.
//
// Every hop of the graph that crosses a namespace resolves only when a grant
// (Gateway API's ReferenceGrant) in the namespace of the object referred to
// permits the referring kind from the referring namespace:
//
//	hop                                        referrer (grant's from)              referent (grant's to)
//	source spec.sources[] → flag set           FeatureFlagSource                    FeatureFlag
//	workload annotation → source               Pod, or the workload's own kind      FeatureFlagSource
//	workload annotation → in-process config    Pod, or the workload's own kind      InProcessConfiguration
//	workload reads a flag set itself           Pod, or the workload's own kind      FeatureFlag, every name
//	(kubernetes provider)
//	Flagd spec.featureFlagSource → source      Flagd (core.openfeature.dev)         FeatureFlagSource
//	Flagd's pods read a flag set itself        Pod, or Flagd                        FeatureFlag, every name
//	(kubernetes provider)
//
// A workload's annotations are its pod template's, so a grant names the
// pods (group "", kind Pod: every workload of the namespace, whatever owns
// its pods) or one workload kind (group apps: Deployment, StatefulSet or
// DaemonSet). The kubernetes provider is a hop of its own: flagd reads the
// FeatureFlag with the pod's service account, and flagd's kubernetes sync
// lists and watches every FeatureFlag of the flag set's namespace, which
// RBAC cannot narrow to one name. So a workload reads a flag set of another
// namespace that way only when that namespace grants its pods every
// FeatureFlag (a `to` entry without a name); a grant of one name is not
// enough, because the Role it would take exposes the others.
//
// A Flagd's pods are a workload's for this rule: its namespace is entitled
// to its source's flag sets as a targeted workload's is, and they read flag
// sets of another namespace themselves only with a grant of every
// FeatureFlag there.
//
// An unresolved hop has no edge: nothing is copied, granted, injected or
// served through it. Consumers read the outcome from the graph (edges,
// FlagSetRefs, AnnotationRefs, DeniedReferrers, MayReadDirectly, MayRead);
// none of them decides it again.

// Group names used in grants.
const (
	// GroupOpenFeature is the API group of flag sets, sources and in-process configurations.
	GroupOpenFeature = "core.openfeature.dev"
	// GroupApps is the API group of the workload kinds.
	GroupApps = "apps"
	// GroupCore is the core API group ("") of Pods.
	GroupCore = ""
	// KindPod is the kind a grant names to let every workload of a namespace refer.
	KindPod = "Pod"
)

// GrantFrom is one `from` entry of a grant: objects of a kind, in a namespace.
type GrantFrom struct {
	Group     string
	Kind      string
	Namespace string
}

// GrantTo is one `to` entry of a grant: objects of a kind in the grant's
// namespace, one by name, or all of them when Name is empty.
type GrantTo struct {
	Group string
	Kind  string
	Name  string
}

// Grant permits objects of other namespaces to refer to objects of the
// grant's namespace, as a Gateway API ReferenceGrant does: each of From may
// refer to each of To.
type Grant struct {
	Namespace string
	Name      string
	From      []GrantFrom
	To        []GrantTo
}

// Key returns the grant's key.
func (g Grant) Key() Key { return Key{Kind: KindGrant, Namespace: g.Namespace, Name: g.Name} }

// normalize sorts and dedupes the entries, so that grants compare by what they permit.
func (g *Grant) normalize() {
	g.From = slices.Clone(g.From)
	slices.SortFunc(g.From, func(a, b GrantFrom) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace))
	})
	g.From = slices.Compact(g.From)
	g.To = slices.Clone(g.To)
	slices.SortFunc(g.To, func(a, b GrantTo) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	g.To = slices.Compact(g.To)
}

// equal tells whether two normalized grants permit the same.
func (g *Grant) equal(other *Grant) bool {
	return slices.Equal(g.From, other.From) && slices.Equal(g.To, other.To)
}

// lets tells whether the grant lets objects of group/kind in namespace from
// refer to `to` (of the grant's namespace): to one object by name, or, when
// every is set, to every object of to's kind.
func (g *Grant) lets(group, kind, from string, to Key, every bool) bool {
	if !slices.Contains(g.From, GrantFrom{Group: group, Kind: kind, Namespace: from}) {
		return false
	}
	toGroup := to.GroupVersionKind().Group
	for _, t := range g.To {
		if t.Group == toGroup && t.Kind == string(to.Kind) && (t.Name == "" || (!every && t.Name == to.Name)) {
			return true
		}
	}
	return false
}

// referrerKinds lists the (group, kind) pairs a grant may name for a referrer.
type referrerKind struct{ group, kind string }

var sourceReferrer = []referrerKind{{GroupOpenFeature, v1beta1.FeatureFlagSourceKind}}

// workloadReferrer is how a grant names a workload: its pods, or its own
// kind (with its API group). A Flagd's pods read flag sets as a workload's
// do: a grant names their pods, or kind Flagd.
func workloadReferrer(k Kind) []referrerKind {
	if k == KindFlagd {
		return []referrerKind{{GroupCore, KindPod}, {GroupOpenFeature, v1beta1.FlagdKind}}
	}
	group, kind := k.GroupKind()
	return []referrerKind{{GroupCore, KindPod}, {group, kind}}
}

// namesWorkload tells whether rk is one of workloadReferrer(k), without
// making the list.
func namesWorkload(rk referrerKind, k Kind) bool {
	if rk == (referrerKind{GroupCore, KindPod}) {
		return true
	}
	if k == KindFlagd {
		return rk == referrerKind{GroupOpenFeature, v1beta1.FlagdKind}
	}
	group, kind := k.GroupKind()
	return rk == referrerKind{group, kind}
}

// permitted is the tenancy rule: whether a referrer of one of kinds in
// namespace from may refer to `to`. Within a namespace it always may.
func (st *state) permitted(kinds []referrerKind, from string, to Key, every bool) bool {
	if from == to.Namespace {
		return true
	}
	grants, _ := st.grantsByNs.get(nsKey(to.Namespace))
	for k := range grants.all() {
		n, _ := st.g.node(k)
		for _, rk := range kinds {
			if n.payload.grant.lets(rk.group, rk.kind, from, to, every) {
				return true
			}
		}
	}
	return false
}

// sourceMayRef: the hop from a source's spec.sources[] entry to a flag set.
func (st *state) sourceMayRef(sourceNamespace string, flagSet Key) bool {
	return st.permitted(sourceReferrer, sourceNamespace, flagSet, false)
}

// workloadMayRef: the hop from a workload's annotation to a source or an
// in-process configuration.
func (st *state) workloadMayRef(w, target Key) bool {
	return st.permitted(workloadReferrer(w.Kind), w.Namespace, target, false)
}

// workloadMayRead: the hop of the kubernetes provider, the workload's pods
// reading a flag set with their own service account.
func (st *state) workloadMayRead(w, flagSet Key) bool {
	return st.permitted(workloadReferrer(w.Kind), w.Namespace, flagSet, true)
}

// AnnotationRef is one source or in-process configuration that a workload's
// pod-template annotation names, and whether that reference resolves:
// NotPermitted across namespaces without a grant (whether or not the object
// exists, so that nothing tells a namespace what exists in another),
// NotFound when permitted but absent, else Resolved.
type AnnotationRef struct {
	Target Key
	State  RefState
}

// annotationRefs lists the annotation references of a workload, sources
// first, each in annotation order.
func (st *state) annotationRefs(w Key) []AnnotationRef {
	n, ok := st.g.node(w)
	if !ok || n.payload.workload == nil {
		return nil
	}
	rec := n.payload.workload
	out := make([]AnnotationRef, 0, len(rec.annotSources)+len(rec.annotIPCs))
	for _, t := range slices.Concat(rec.annotSources, rec.annotIPCs) {
		out = append(out, AnnotationRef{Target: t, State: st.annotationState(w, t)})
	}
	return out
}

func (st *state) annotationState(w, target Key) RefState {
	switch {
	case !st.workloadMayRef(w, target):
		return RefNotPermitted
	case !st.g.has(target):
		return RefNotFound
	}
	return RefResolved
}

// deniedReferrers lists the workloads of other namespaces whose annotation
// names target without a grant permitting it, sorted.
func (st *state) deniedReferrers(target Key) []Key {
	var index pmap[Key, pset[Key]]
	switch target.Kind {
	case KindSource:
		index = st.annotSources
	case KindInProcessConfig:
		index = st.annotIPCs
	default:
		return nil
	}
	var out []Key
	for _, w := range indexGet(index, target) {
		if w.Namespace != target.Namespace && !st.workloadMayRef(w, target) {
			out = append(out, w)
		}
	}
	if target.Kind == KindSource {
		out = append(out, st.deniedFlagds(target)...)
	}
	return sortedKeys(out)
}

// crossAnnotationPairs lists the (target namespace, workload namespace)
// pairs of a workload's annotation references that leave its namespace.
func crossAnnotationPairs(w Key, rec *workloadRec) []nsPair {
	var out []nsPair
	for _, t := range slices.Concat(rec.annotSources, rec.annotIPCs) {
		if pair := (nsPair{to: t.Namespace, from: w.Namespace}); t.Namespace != w.Namespace && !slices.Contains(out, pair) {
			out = append(out, pair)
		}
	}
	return out
}

// kubernetesRefNamespaces lists the namespaces of the flag sets that a
// source reads with the kubernetes provider, in any state.
func kubernetesRefNamespaces(refs []FlagSetRef) []nsKey {
	var out []nsKey
	for _, r := range refs {
		if ns := nsKey(r.FlagSet.Namespace); r.Provider == string(v1beta1.SyncProviderKubernetes) && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// readerNamespaces lists the namespaces whose workloads are entitled to a
// flag set besides its own: the namespaces of the sources that resolve it,
// and of the workloads of other namespaces whose annotation names such a
// source with a grant permitting it (the only way a source applies across
// namespaces). It is what flagplane would copy into those namespaces, so
// the sync server serves a namespace exactly that.
func (st *state) readerNamespaces(flagSet Key) []string {
	var out []string
	for _, s := range st.g.parents(flagSet, relRefs) {
		if !slices.Contains(out, s.Namespace) {
			out = append(out, s.Namespace)
		}
		for _, w := range indexGet(st.crossTargets, s) {
			if !slices.Contains(out, w.Namespace) {
				out = append(out, w.Namespace)
			}
		}
	}
	slices.Sort(out)
	return out
}
