package syncserver

import (
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// EmptyFlagSet is what the server serves for a flag set that does not exist
// (any more): flagd then answers FLAG_NOT_FOUND, as it would for a flag set
// without flags.
const EmptyFlagSet = `{"flags":{}}`

// emptyRevision is the revision of EmptyFlagSet.
var emptyRevision = flagsets.Revision(EmptyFlagSet)

// served is what a flag set serves in a view: its rendering in the graph
// (topology.View.FlagSetRendered, made once per edit), which the ConfigMaps
// of file-mode consumers hold too, with its revision; or EmptyFlagSet when
// it does not exist. ok is false when the flag set cannot be served: the
// caller keeps serving its last valid content, as the ConfigMaps keep
// theirs.
func served(v *topology.View, flagSet topology.Key) (content, revision string, exists, ok bool) {
	r, found := v.FlagSetRendered(flagSet)
	if !found {
		return EmptyFlagSet, emptyRevision, false, true
	}
	return r.Content, r.Revision, true, r.Valid() && r.Content != ""
}

// servedIn is served for the subscribers of one namespace: the revision a
// rollout plan gives the namespace (topology.View.ServedFor). ok is false
// when it cannot be served: the caller serves the last valid content.
func servedIn(v *topology.View, flagSet topology.Key, namespace string) (content, revision string, exists, ok bool) {
	if !v.RolloutPlan(flagSet).Staged() {
		return served(v, flagSet)
	}
	s, found := v.ServedFor(flagSet, namespace)
	if !found {
		return EmptyFlagSet, emptyRevision, false, true
	}
	return s.Content, s.Revision, true, !s.Held && s.Valid() && s.Content != ""
}
