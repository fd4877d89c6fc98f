package topology

import (
	"slices"

	gonum "gonum.org/v1/gonum/graph"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// View is a read-only snapshot of the topology. It is immutable: any number
// of goroutines may use it, for as long as they like, while writers go on.
// Lists are sorted by key unless a method says otherwise; objects returned
// are the topology's own and must not be modified.
type View struct {
	state *state
}

// DefaultSyncProvider is the provider of a spec.sources entry that names
// none and whose source has no defaultSyncProvider (see
// WithDefaultSyncProvider): file unless the topology was built with another.
func (v *View) DefaultSyncProvider() v1beta1.SyncProviderType {
	return ProviderInForce(v1beta1.Source{}, "", v.state.defaultProvider)
}

// FlagSet returns a FeatureFlag.
func (v *View) FlagSet(k Key) (*v1beta1.FeatureFlag, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.flagSet == nil {
		return nil, false
	}
	return n.payload.flagSet, true
}

// FlagSetValid tells whether a flag set exists and can be served
// (Rendered.Valid, WithFlagSetRendering).
func (v *View) FlagSetValid(k Key) bool {
	n, ok := v.state.g.node(k)
	return ok && n.payload.flagSet != nil && n.payload.rendered.Valid()
}

// Source returns a FeatureFlagSource.
func (v *View) Source(k Key) (*v1beta1.FeatureFlagSource, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.source == nil {
		return nil, false
	}
	return n.payload.source.obj, true
}

// InProcessConfig returns an InProcessConfiguration.
func (v *View) InProcessConfig(k Key) (*v1beta1.InProcessConfiguration, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.ipc == nil {
		return nil, false
	}
	return n.payload.ipc, true
}

// Workload returns a workload as last upserted (ServiceAccountName defaulted).
func (v *View) Workload(k Key) (Workload, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.workload == nil {
		return Workload{}, false
	}
	return n.payload.workload.w, true
}

// FlagSets lists the flag sets.
func (v *View) FlagSets() []Key { return v.state.g.ofKind(KindFlagSet) }

// Sources lists the sources.
func (v *View) Sources() []Key { return v.state.g.ofKind(KindSource) }

// OfKind lists the nodes of one kind, sorted as the lists of each kind are.
func (v *View) OfKind(kind Kind) []Key { return v.state.g.ofKind(kind) }

// InProcessConfigs lists the in-process configurations.
func (v *View) InProcessConfigs() []Key { return v.state.g.ofKind(KindInProcessConfig) }

// Workloads lists the workloads of all kinds.
func (v *View) Workloads() []Key {
	var out []Key
	for k := range v.state.g.nodes.all() {
		if k.Kind.IsWorkload() {
			out = append(out, k)
		}
	}
	return sortedKeys(out)
}

// ConfigMaps lists the ConfigMaps that some workload needs.
func (v *View) ConfigMaps() []Key { return v.state.g.ofKind(KindConfigMap) }

// SourcesOfWorkload lists the sources that apply to a workload, in the order
// their settings are merged: first those its openfeature.dev/featureflagsource
// annotation names, in annotation order, then those that target it by
// targetRefs or selector, by key. No source appears twice.
func (v *View) SourcesOfWorkload(w Key) []Key { return v.state.sourcesOfWorkload(w) }

// InProcessConfigsOfWorkload lists the in-process configurations of a
// workload in the order of its openfeature.dev/inprocessconfiguration annotation.
func (v *View) InProcessConfigsOfWorkload(w Key) []Key { return v.state.ipcsOfWorkload(w) }

// WorkloadsOfSource lists the workloads a source applies to, by any means.
func (v *View) WorkloadsOfSource(s Key) []Key { return sortedKeys(v.state.g.children(s, relTargets)) }

// FirstWorkloadsOfSource returns how many workloads a source applies to and
// the first limit of them in WorkloadsOfSource's order, without sorting
// them all: a status that lists a few of thousands of targets costs one
// comparison per target, not a sort.
func (v *View) FirstWorkloadsOfSource(s Key, limit int) (count int, first []Key) {
	n, ok := v.state.g.node(s)
	if !ok || limit <= 0 {
		return v.state.g.countChildren(s, relTargets), nil
	}
	for w, r := range n.out.all() {
		if r != relTargets {
			continue
		}
		count++
		if len(first) == limit && compareKeys(w, first[limit-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(first, w, compareKeys)
		if len(first) == limit {
			first = first[:limit-1]
		}
		first = slices.Insert(first, i, w)
	}
	return count, first
}

// ContestedWorkloadsOfSource lists, sorted, the workloads a source applies
// to that something else applies to as well (another source or an
// in-process configuration): the only ones where it can lose a setting.
func (v *View) ContestedWorkloadsOfSource(s Key) []Key {
	n, ok := v.state.g.node(s)
	if !ok {
		return nil
	}
	var out []Key
	for w, r := range n.out.all() {
		if r == relTargets && v.state.g.countParents(w, relTargets, 2) >= 2 {
			out = append(out, w)
		}
	}
	return sortedKeys(out)
}

// WorkloadsOfInProcessConfig lists the workloads an in-process configuration applies to.
func (v *View) WorkloadsOfInProcessConfig(c Key) []Key {
	return sortedKeys(v.state.g.children(c, relTargets))
}

// InProcessReaders lists the workloads whose in-process SDKs read flag set
// f: those an in-process configuration whose selector names f applies to,
// in the namespaces entitled to f (MayRead: a selector of another
// namespace names f without reading it, from flagplane's sync server at
// least), sorted.
func (v *View) InProcessReaders(f Key) []Key {
	var out []Key
	for _, c := range indexGet(v.state.ipcsSelecting, f) {
		for _, w := range v.state.g.children(c, relTargets) {
			if v.MayRead(w.Namespace, f) {
				out = append(out, w)
			}
		}
	}
	return slices.Compact(sortedKeys(out))
}

// FlagSetRefs lists every spec.sources entry of a source that names a flag
// set, in spec order, with the provider in force and the reference's state.
func (v *View) FlagSetRefs(s Key) []FlagSetRef {
	n, ok := v.state.g.node(s)
	if !ok || n.payload.source == nil {
		return nil
	}
	return slices.Clone(n.payload.source.refs)
}

// DeliversWith tells whether source delivers flagSet (a Resolved entry of
// its) with provider: how the blast radius finds the sync server's
// subscribers and status the readers it cannot observe.
func (v *View) DeliversWith(source, flagSet Key, provider string) bool {
	n, ok := v.state.g.node(source)
	if !ok || n.payload.source == nil {
		return false
	}
	return slices.ContainsFunc(n.payload.source.refs, func(r FlagSetRef) bool {
		return r.FlagSet == flagSet && r.State == RefResolved && r.Provider == provider
	})
}

// UnresolvedRefs lists the FlagSetRefs of a source that are not Resolved, in spec order.
func (v *View) UnresolvedRefs(s Key) []FlagSetRef {
	var out []FlagSetRef
	for _, r := range v.FlagSetRefs(s) {
		if r.State != RefResolved {
			out = append(out, r)
		}
	}
	return out
}

// SourcesOfFlagSet lists the sources with a Resolved reference to a flag set.
func (v *View) SourcesOfFlagSet(f Key) []Key { return sortedKeys(v.state.g.parents(f, relRefs)) }

// ConsumerNamespaces lists the namespaces that get a ConfigMap of a flag set.
func (v *View) ConsumerNamespaces(f Key) []string {
	cms := v.state.g.children(f, relRenders)
	out := make([]string, 0, len(cms))
	for _, cm := range cms {
		out = append(out, cm.Namespace)
	}
	slices.Sort(out)
	return out
}

// ConfigMapNeeded tells whether some workload mounts the ConfigMap; one that
// is not needed is to be deleted.
func (v *View) ConfigMapNeeded(cm Key) bool { return cm.Kind == KindConfigMap && v.state.g.has(cm) }

// ConfigMapsOfWorkload lists the ConfigMaps a workload (or a Flagd) mounts.
func (v *View) ConfigMapsOfWorkload(w Key) []Key { return sortedKeys(v.state.g.parents(w, relMounts)) }

// WorkloadsOfConfigMap lists the workloads (and Flagds) that mount a ConfigMap.
func (v *View) WorkloadsOfConfigMap(cm Key) []Key {
	return sortedKeys(v.state.g.children(cm, relMounts))
}

// FlagdsOfConfigMap lists, sorted, the Flagds that mount a ConfigMap,
// found through the sources of its flag set and the Flagds that name them
// (an index), without visiting the workloads that mount the ConfigMap or
// that the sources target: the event of a ConfigMap that thousands of
// workloads mount costs what its Flagds do.
func (v *View) FlagdsOfConfigMap(cm Key) []Key {
	var out []Key
	for _, s := range v.state.g.parents(cm.FlagSet(), relRefs) {
		for _, f := range indexGet(v.state.flagdsBySource, s) {
			if r, ok := v.state.g.edge(cm, f); ok && r == relMounts && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return sortedKeys(out)
}

// ConfigMapByName finds the needed ConfigMap with this namespace and object
// name (see ConfigMapName): how a ConfigMap event finds its node.
func (v *View) ConfigMapByName(namespace, name string) (Key, bool) {
	return v.state.cmByName.get(cmName{namespace: namespace, name: name})
}

// Counts gives the number of nodes of every kind, zeros included.
func (v *View) Counts() map[Kind]int {
	out := make(map[Kind]int, len(nodeKinds))
	for i, info := range nodeKinds {
		k := info.kind
		out[k] = v.state.g.counts[i]
	}
	return out
}

// Graph presents the view as a gonum directed graph, for gonum's algorithms
// (paths, topological sorts, ...). Nodes are GraphNodes numbered in key
// order, edges GraphEdges. Numbering the nodes costs O(n log n) per call.
func (v *View) Graph() gonum.Directed { return newGonumGraph(&v.state.g) }

// AnnotationRefs lists the sources, then the in-process configurations,
// that a workload's pod-template annotations name (when
// openfeature.dev/enabled is "true"), in annotation order, each with
// whether the reference resolves under the tenancy rule.
func (v *View) AnnotationRefs(w Key) []AnnotationRef { return v.state.annotationRefs(w) }

// DeniedReferrers lists the workloads of other namespaces whose annotation
// names a source or in-process configuration without a grant permitting it.
func (v *View) DeniedReferrers(target Key) []Key { return v.state.deniedReferrers(target) }

// MayReadDirectly tells whether a workload's pods may read a flag set
// themselves, with their service account (the kubernetes provider): always
// within its namespace, across namespaces only when a grant there permits
// its pods every FeatureFlag.
func (v *View) MayReadDirectly(w, flagSet Key) bool { return v.state.workloadMayRead(w, flagSet) }

// MayRead tells whether the workloads of namespace are entitled to a flag
// set: it is theirs, or flagplane delivers it into their namespace through
// references that the tenancy rule resolves.
func (v *View) MayRead(namespace string, flagSet Key) bool {
	return flagSet.Namespace == namespace || slices.Contains(v.state.readerNamespaces(flagSet), namespace)
}

// ReaderNamespaces lists the namespaces other than its own that are
// entitled to a flag set (see MayRead), sorted.
func (v *View) ReaderNamespaces(flagSet Key) []string {
	return slices.DeleteFunc(v.state.readerNamespaces(flagSet), func(ns string) bool { return ns == flagSet.Namespace })
}

// WithWorkload returns a view of the graph with w upserted, as if its
// informer had delivered it, and leaves v as it is. The Pod webhook admits
// the first pod of a workload that only its pods make known (a Job, an Argo
// Rollout) before any informer has seen it: it computes that pod's injection
// from such a view.
func (v *View) WithWorkload(w Workload) (*View, error) {
	return v.whatIf(func(t *Topology) (Delta, error) { return t.UpsertWorkload(w) })
}

// whatIf returns a view of the graph with edit applied to a copy, and
// leaves v as it is. The copy computes no Delta: only its state is read.
func (v *View) whatIf(edit func(*Topology) (Delta, error)) (*View, error) {
	copied := *v.state
	t := &Topology{state: &copied, token: newToken(), whatIf: true}
	if _, err := edit(t); err != nil {
		return nil, err
	}
	return t.Snapshot(), nil
}

// WithFlagSet returns a view of the graph with ff upserted, and leaves v as
// it is: the FeatureFlag webhook tells what an edit will reach before it is
// stored.
func (v *View) WithFlagSet(ff *v1beta1.FeatureFlag) (*View, error) {
	return v.whatIf(func(t *Topology) (Delta, error) { return t.UpsertFlagSet(ff) })
}

// WithServedFlagSet is WithFlagSet for a flag set whose rendering is known
// already (the FeatureFlag webhook has validated it): ff takes r as what it
// serves, and the topology renders nothing.
func (v *View) WithServedFlagSet(ff *v1beta1.FeatureFlag, r Rendered) (*View, error) {
	return v.whatIf(func(t *Topology) (Delta, error) {
		render := t.state.renderFlagSet
		t.state.renderFlagSet = func(x *v1beta1.FeatureFlag) Rendered {
			if x == ff {
				return r
			}
			return render(x)
		}
		return t.UpsertFlagSet(ff)
	})
}

// WithSource returns a view of the graph with s upserted, and leaves v as it
// is: the FeatureFlagSource webhook tells what an edit will change before it
// is stored.
func (v *View) WithSource(s *v1beta1.FeatureFlagSource) (*View, error) {
	return v.whatIf(func(t *Topology) (Delta, error) { return t.UpsertSource(s) })
}

// TargetNamespaces lists, sorted, the namespaces of the consumers of a
// source: its own when it targets a workload or serves a Flagd there, and
// those of the workloads of other namespaces whose annotation names it and
// of the Flagds of other namespaces that name it (with a grant).
// It costs what the source's targets in other namespaces cost, not what all
// its targets do.
func (v *View) TargetNamespaces(s Key) []string {
	n, ok := v.state.g.node(s)
	if !ok || n.payload.source == nil {
		return nil
	}
	cross, _ := v.state.crossTargets.get(s)
	refs := len(resolvedFlagSets(n.payload.source.refs, ""))
	var out []string
	if n.out.len()-refs-cross.len() > 0 {
		out = append(out, s.Namespace)
	}
	for _, w := range cross.keys() {
		if !slices.Contains(out, w.Namespace) {
			out = append(out, w.Namespace)
		}
	}
	slices.Sort(out)
	return out
}
