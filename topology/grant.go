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
	d, err := t.apply(func(x *tx) error { return x.upsertGrant(&g) })
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
	var before []string
	if n, ok := x.st.g.node(k); ok {
		old := n.payload.grant
		x.st.g.setPayload(x.o, k, payload{grant: g})
		if slices.Equal(old.FromNamespaces, g.FromNamespaces) && slices.Equal(old.ToNames, g.ToNames) {
			return nil
		}
		before = old.FromNamespaces
	} else {
		if err := x.st.g.addNode(x.o, k, layerSource, payload{grant: g}); err != nil {
			return err
		}
		indexAdd(x.o, &x.st.grantsByNs, nsKey(k.Namespace), k)
	}
	return x.regrant(k.Namespace, before, g.FromNamespaces)
}

func (x *tx) deleteGrant(k Key) error {
	n, ok := x.st.g.node(k)
	if !ok {
		return nil
	}
	from := n.payload.grant.FromNamespaces
	x.st.g.removeNode(x.o, k)
	indexDel(x.o, &x.st.grantsByNs, nsKey(k.Namespace), k)
	return x.regrant(k.Namespace, from, nil)
}

// regrant re-evaluates the references into namespace from the namespaces a
// grant named before or names now.
func (x *tx) regrant(namespace string, before, after []string) error {
	for _, from := range append(slices.Clone(before), after...) {
		for _, s := range indexGet(x.st.crossRefs, nsPair{to: namespace, from: from}) {
			if err := x.reevalRefs(s); err != nil {
				return err
			}
		}
	}
	return nil
}
