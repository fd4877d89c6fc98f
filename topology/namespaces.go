package topology

import "maps"

// Namespaces: their labels, which namespaceSelector steps match.

// UpsertNamespace takes a Namespace's labels. The Delta: what reads the
// plans of the flag sets consumed there, when they changed.
func (t *Topology) UpsertNamespace(name string, nsLabels map[string]string) Delta {
	return t.mustApply(Key{}, func(edit *tx) error {
		before, had := edit.state.nsLabels.get(nsKey(name))
		if had && maps.Equal(before, nsLabels) {
			return nil
		}
		edit.state.nsLabels.set(edit.owner, nsKey(name), nsLabels)
		edit.markAllPlans()
		return nil
	})
}

// DeleteNamespace forgets a Namespace's labels.
func (t *Topology) DeleteNamespace(name string) Delta {
	return t.mustApply(Key{}, func(edit *tx) error {
		if edit.state.nsLabels.del(edit.owner, nsKey(name)) {
			edit.markAllPlans()
		}
		return nil
	})
}

// markAllPlans marks the plans of every staged flag set: a namespace's
// labels can move its consumers between steps. Namespaces change seldom,
// and rollout policies are few.
func (edit *tx) markAllPlans() {
	for f := range edit.state.rolloutsByFlagSet.all() {
		edit.markStaged(f)
	}
}
