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
	d, err := t.apply(g.Key(), func(x *tx) error { return x.upsertGrant(&g) })
	if err != nil {
		return d, fmt.Errorf("upserting %s: %w", g.Key(), err)
	}
	return d, nil
}

// DeleteGrant removes a grant; the Delta is as for UpsertGrant.
func (t *Topology) DeleteGrant(namespace, name string) Delta {
	k := Grant{Namespace: namespace, Name: name}.Key()
	return t.mustApply(k, func(x *tx) error { return x.deleteGrant(k) })
}

func (x *tx) upsertGrant(g *Grant) error {
	k := g.Key()
	var before *Grant
	n, exists := x.st.g.node(k)
	if exists {
		before = n.payload.grant
		if before.equal(g) {
			x.st.g.setPayload(x.o, k, payload{grant: g})
			return nil
		}
	}
	seen := x.observeWorkloadHops(k.Namespace, before, g)
	if exists {
		x.st.g.setPayload(x.o, k, payload{grant: g})
	} else {
		if err := x.st.g.addNode(x.o, k, layerSource, payload{grant: g}); err != nil {
			return err
		}
		indexAdd(x.o, &x.st.grantsByNs, nsKey(k.Namespace), k)
	}
	return x.regrant(k.Namespace, before, g, seen)
}

func (x *tx) deleteGrant(k Key) error {
	n, ok := x.st.g.node(k)
	if !ok {
		return nil
	}
	before := n.payload.grant
	seen := x.observeWorkloadHops(k.Namespace, before, nil)
	x.st.g.removeNode(x.o, k)
	indexDel(x.o, &x.st.grantsByNs, nsKey(k.Namespace), k)
	return x.regrant(k.Namespace, before, nil, seen)
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
func (x *tx) observeWorkloadHops(namespace string, before, after *Grant) map[Key]workloadHops {
	froms := map[string]bool{}
	for _, g := range []*Grant{before, after} {
		if g != nil {
			for _, ns := range g.fromNamespaces() {
				froms[ns] = true
			}
		}
	}
	out := map[Key]workloadHops{}
	for _, from := range slices.Sorted(maps.Keys(froms)) {
		if from == namespace {
			continue
		}
		for _, w := range indexGet(x.st.crossAnnot, nsPair{to: namespace, from: from}) {
			out[w] = workloadHops{}
		}
		for _, s := range indexGet(x.st.kubeRefsInto, nsKey(namespace)) {
			for _, w := range append(x.st.g.children(s, relTargets), x.st.g.children(s, relServes)...) {
				if w.Namespace == from {
					out[w] = workloadHops{}
				}
			}
		}
	}
	for w := range out {
		out[w] = x.st.workloadHopsInto(w, namespace)
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
func (x *tx) regrant(namespace string, before, after *Grant, seen map[Key]workloadHops) error {
	if err := x.regrantSources(namespace, before, after); err != nil {
		return err
	}
	if err := x.regrantFlagds(namespace, before, after); err != nil {
		return err
	}
	for _, w := range sortedKeys(slices.Collect(maps.Keys(seen))) {
		old := seen[w]
		// Annotation edges follow the permission; retarget marks what it changes.
		for _, ref := range old.annotations {
			if ref.Target.Namespace == namespace {
				if err := x.retargetKey(ref.Target, w); err != nil {
					return err
				}
			}
		}
		now := x.st.workloadHopsInto(w, namespace)
		if !slices.Equal(old.annotations, now.annotations) || !maps.Equal(old.reads, now.reads) {
			x.mark(w)
		}
		// The referred side's status lists the referrers it denies.
		for i, ref := range now.annotations {
			if ref.Target.Namespace == namespace && x.st.g.has(ref.Target) &&
				(ref.State == RefNotPermitted) != (old.annotations[i].State == RefNotPermitted) {
				x.mark(ref.Target)
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
func (x *tx) regrantSources(namespace string, before, after *Grant) error {
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
			sources = indexGet(x.st.crossRefs, nsPair{to: namespace, from: from})
		} else {
			for _, name := range names {
				for _, s := range indexGet(x.st.refsTo, FlagSetKey(namespace, name)) {
					if s.Namespace == from {
						sources = append(sources, s)
					}
				}
			}
		}
		for _, s := range sources {
			if err := x.reevalRefs(s); err != nil {
				return err
			}
		}
	}
	return nil
}
