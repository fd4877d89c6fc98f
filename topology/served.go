package topology

// Served is what a consumer of a flag set is to serve.
type Served struct {
	Rendered
	// Held is true when its planned revision's content is not known (its
	// FeatureFlagRevision is not recorded, or not seen yet): the consumer
	// keeps what it has.
	Held bool
}

// ServedFor is what the consumer of a flag set in namespace serves: the
// flag set's rendering, or, while a rollout plan holds the namespace at
// another revision, that revision's. ok is false when the flag set is not
// in the graph.
func (v *View) ServedFor(f Key, namespace string) (Served, bool) {
	r, ok := v.FlagSetRendered(f)
	if !ok {
		return Served{}, false
	}
	plan := v.RolloutPlan(f)
	if !plan.Staged() {
		return Served{Rendered: r}, true
	}
	want := plan.RevisionFor(namespace)
	if want == "" || SameRevision(want, r.Revision) {
		return Served{Rendered: r}, true
	}
	held, ok := v.state.revisionRendered(f, want)
	if !ok {
		return Served{Rendered: Rendered{Revision: want}, Held: true}, true
	}
	return Served{Rendered: held}, true
}

// RevisionRendered is the rendering of a flag set's revision of hash: its
// current one when that is it, else that of a FeatureFlagRevision the flag
// set owns whose content renders to it. ok is false when the graph holds
// neither.
func (v *View) RevisionRendered(f Key, hash string) (Rendered, bool) {
	return v.state.revisionRendered(f, hash)
}
