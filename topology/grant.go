package topology

import (
	"fmt"
	"maps"
	"slices"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// UpsertGrant adds or updates a grant (see tenancy.go for what grants permit).
//
// Only what references the grant's namespace from a namespace the grant
// names (before or after) is re-evaluated: sources with cross-namespace
// references to its flag sets, workloads whose annotations name its sources
// or in-process configurations, and workloads that read its flag sets with
// the kubernetes provider. The Delta: the sources whose reference states
// changed, the flag sets they now resolve or no longer do, the workloads
// that gained or lost a source, an in-process configuration or a direct
// read, or whose annotation references changed state, the sources and
// in-process configurations whose denied referrers changed, and the
// ConfigMaps created or no longer needed. A grant that permits what it
// permitted gives an empty Delta.
func (t *Topology) UpsertGrant(g Grant) (Delta, error) {
	if g.Namespace == "" || g.Name == "" {
		return Delta{}, fmt.Errorf("upserting grant %q in namespace %q: namespace and name are required", g.Name, g.Namespace)
	}
	g.normalize()
	d, err := t.apply(g.Key(), func(edit *tx) error { return edit.upsertGrant(&g) })
	if err != nil {
		return d, fmt.Errorf("upserting %s: %w", g.Key(), err)
	}
	return d, nil
}

// DeleteGrant removes a grant; the Delta is as for UpsertGrant.
func (t *Topology) DeleteGrant(namespace, name string) Delta {
	k := Grant{Namespace: namespace, Name: name}.Key()
	return t.mustApply(k, func(edit *tx) error { return edit.deleteGrant(k) })
}

func (edit *tx) upsertGrant(g *Grant) error {
	k := g.Key()
	var before *Grant
	n, exists := edit.state.g.node(k)
	if exists {
		before = n.payload.grant
		if before.equal(g) {
			edit.state.g.setPayload(edit.owner, k, payload{grant: g})
			return nil
		}
	}
	seen := edit.observeWorkloadHops(k.Namespace, before, g)
	if exists {
		edit.state.g.setPayload(edit.owner, k, payload{grant: g})
	} else {
		if err := edit.state.g.addNode(edit.owner, k, layerSource, payload{grant: g}); err != nil {
			return err
		}
		indexAdd(edit.owner, &edit.state.grantsByNs, nsKey(k.Namespace), k)
	}
	return edit.regrant(k.Namespace, before, g, seen)
}

func (edit *tx) deleteGrant(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok {
		return nil
	}
	before := n.payload.grant
	seen := edit.observeWorkloadHops(k.Namespace, before, nil)
	edit.state.g.removeNode(edit.owner, k)
	indexDel(edit.owner, &edit.state.grantsByNs, nsKey(k.Namespace), k)
	return edit.regrant(k.Namespace, before, nil, seen)
}

// workloadHops is what a grant change may change for one workload, taken
// before the change to compare with after it.
type workloadHops struct {
	annotations []AnnotationRef
	// reads are the flag sets of namespace the workload reads with the
	// kubernetes provider, and whether it may.
	reads map[Key]bool
}

// observeWorkloadHops records, before a grant of namespace changes from
// before to after, the hops of every workload of the namespaces either
// version names that refer into namespace: annotation references and
// kubernetes-provider reads.
func (edit *tx) observeWorkloadHops(namespace string, before, after *Grant) map[Key]workloadHops {
	// The kinds either version names, by namespace: a workload's hops
	// depend only on entries of its own referrer kinds (workloadReferrer),
	// so a grant that lets sources read flag sets, the common case, changes
	// no workload's: its candidates are passed over without computing
	// their hops (each costs the workload's sources and annotations).
	froms := map[string][]referrerKind{}
	for _, g := range []*Grant{before, after} {
		if g != nil {
			for _, f := range g.From {
				froms[f.Namespace] = append(froms[f.Namespace], referrerKind{f.Group, f.Kind})
			}
		}
	}
	named := func(w Key) bool {
		return slices.ContainsFunc(froms[w.Namespace], func(rk referrerKind) bool { return namesWorkload(rk, w.Kind) })
	}
	out := map[Key]workloadHops{}
	for _, from := range slices.Sorted(maps.Keys(froms)) {
		if from == namespace {
			continue
		}
		for _, w := range indexGet(edit.state.crossAnnot, nsPair{to: namespace, from: from}) {
			if named(w) {
				out[w] = workloadHops{}
			}
		}
		for _, s := range indexGet(edit.state.kubeRefsInto, nsKey(namespace)) {
			for _, w := range append(edit.state.g.children(s, relTargets), edit.state.g.children(s, relServes)...) {
				if w.Namespace == from && named(w) {
					out[w] = workloadHops{}
				}
			}
		}
	}
	for w := range out {
		out[w] = edit.state.workloadHopsInto(w, namespace)
	}
	return out
}

// workloadHopsInto takes the hops of a workload into namespace as of now.
func (st *state) workloadHopsInto(w Key, namespace string) workloadHops {
	h := workloadHops{annotations: st.annotationRefs(w), reads: map[Key]bool{}}
	for _, s := range st.consumerSources(w) {
		n, _ := st.g.node(s)
		if n.payload.source == nil {
			continue
		}
		for _, f := range resolvedFlagSets(n.payload.source.refs, v1beta1.SyncProviderKubernetes) {
			if f.Namespace == namespace {
				h.reads[f] = st.workloadMayRead(w, f)
			}
		}
	}
	return h
}

// regrant re-evaluates what a grant of namespace changing from before to
// after (nil: absent) may permit or stop permitting. seen holds the
// workload hops observed before the change.
func (edit *tx) regrant(namespace string, before, after *Grant, seen map[Key]workloadHops) error {
	if err := edit.regrantSources(namespace, before, after); err != nil {
		return err
	}
	if err := edit.regrantFlagds(namespace, before, after); err != nil {
		return err
	}
	for _, w := range sortedKeys(slices.Collect(maps.Keys(seen))) {
		old := seen[w]
		// Annotation edges follow the permission; retarget marks what it changes.
		for _, ref := range old.annotations {
			if ref.Target.Namespace == namespace {
				if err := edit.retargetKey(ref.Target, w); err != nil {
					return err
				}
			}
		}
		now := edit.state.workloadHopsInto(w, namespace)
		if !slices.Equal(old.annotations, now.annotations) || !maps.Equal(old.reads, now.reads) {
			edit.mark(w)
		}
		// The referred side's status lists the referrers it denies.
		for i, ref := range now.annotations {
			if ref.Target.Namespace == namespace && edit.state.g.has(ref.Target) &&
				(ref.State == RefNotPermitted) != (old.annotations[i].State == RefNotPermitted) {
				edit.mark(ref.Target)
			}
		}
	}
	return nil
}

// regrantSources re-evaluates the references of sources into namespace that
// a grant changing from before to after may permit or stop permitting: for
// each namespace either version lets sources in, the references to the flag
// sets either version names, or all references from there when a version
// names every FeatureFlag.
func (edit *tx) regrantSources(namespace string, before, after *Grant) error {
	var froms, names []string
	every := map[string]bool{}
	for _, g := range []*Grant{before, after} {
		if g == nil {
			continue
		}
		var sourceFroms []string
		for _, f := range g.From {
			if f.Group == GroupOpenFeature && f.Kind == v1beta1.FeatureFlagSourceKind {
				sourceFroms = append(sourceFroms, f.Namespace)
			}
		}
		if len(sourceFroms) == 0 {
			continue
		}
		all := false
		for _, t := range g.To {
			if t.Group == GroupOpenFeature && t.Kind == v1beta1.FeatureFlagKind {
				if t.Name == "" {
					all = true
				} else {
					names = append(names, t.Name)
				}
			}
		}
		for _, from := range sourceFroms {
			froms = append(froms, from)
			every[from] = every[from] || all
		}
	}
	slices.Sort(froms)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, from := range slices.Compact(froms) {
		var sources []Key
		if every[from] {
			sources = indexGet(edit.state.crossRefs, nsPair{to: namespace, from: from})
		} else {
			for _, name := range names {
				for _, s := range indexGet(edit.state.refsTo, FlagSetKey(namespace, name)) {
					if s.Namespace == from {
						sources = append(sources, s)
					}
				}
			}
		}
		for _, s := range sources {
			if err := edit.reevalRefs(s); err != nil {
				return err
			}
		}
	}
	return nil
}
