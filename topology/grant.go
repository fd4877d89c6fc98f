package topology

import (
	"fmt"
	"slices"
)

// UpsertGrant adds or updates a grant. A grant in namespace N lets the
// sources of its FromNamespaces refer to the flag sets of N (all of them, or
// those ToNames lists).
//
// Only the sources with cross-namespace references into N from a namespace
// the grant names (before or after) are re-evaluated. The Delta: those whose
// reference states changed, the flag sets they now resolve or no longer do,
// their workloads, the ConfigMaps created or no longer needed. A grant that
// permits what it permitted gives an empty Delta.
func (t *Topology) UpsertGrant(g Grant) (Delta, error) {
	if g.Namespace == "" || g.Name == "" {
		return Delta{}, fmt.Errorf("upserting grant %q in namespace %q: namespace and name are required", g.Name, g.Namespace)
	}
	g.FromNamespaces = normalized(g.FromNamespaces)
	g.ToNames = normalized(g.ToNames)
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

// normalized sorts and dedupes a list, so that grants compare by what they permit.
func normalized(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func (x *tx) upsertGrant(g *Grant) error {
	k := g.Key()
	var before *Grant
	if n, ok := x.st.g.node(k); ok {
		before = n.payload.grant
		x.st.g.setPayload(x.o, k, payload{grant: g})
		if slices.Equal(before.FromNamespaces, g.FromNamespaces) && slices.Equal(before.ToNames, g.ToNames) {
			return nil
		}
	} else {
		if err := x.st.g.addNode(x.o, k, layerSource, payload{grant: g}); err != nil {
			return err
		}
		indexAdd(x.o, &x.st.grantsByNs, nsKey(k.Namespace), k)
	}
	return x.regrant(k.Namespace, before, g)
}

func (x *tx) deleteGrant(k Key) error {
	n, ok := x.st.g.node(k)
	if !ok {
		return nil
	}
	x.st.g.removeNode(x.o, k)
	indexDel(x.o, &x.st.grantsByNs, nsKey(k.Namespace), k)
	return x.regrant(k.Namespace, n.payload.grant, nil)
}

// regrant re-evaluates the references into namespace that a grant changing
// from before to after (nil: absent) may permit or stop permitting: for each
// namespace either version lets in, the references to the flag sets either
// version names, or all references from there when a version names none.
func (x *tx) regrant(namespace string, before, after *Grant) error {
	var froms, names []string
	wholeNamespace := func(g *Grant, from string) bool {
		return g != nil && len(g.ToNames) == 0 && slices.Contains(g.FromNamespaces, from)
	}
	for _, g := range []*Grant{before, after} {
		if g != nil {
			froms = append(froms, g.FromNamespaces...)
			names = append(names, g.ToNames...)
		}
	}
	slices.Sort(froms)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, from := range slices.Compact(froms) {
		var sources []Key
		if wholeNamespace(before, from) || wholeNamespace(after, from) {
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
