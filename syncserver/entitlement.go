package syncserver

import (
	"github.com/flagplane/flagplane/topology"
)

// Entitled tells whether the workloads of namespace may read flagSet from the
// sync server. They may read
//
//   - every flag set of their own namespace, and
//   - a flag set of another namespace that a FeatureFlagSource of their
//     namespace references and that reference is Resolved: which, across
//     namespaces, takes a ReferenceGrant in the flag set's namespace, exactly
//     as for the ConfigMaps flagplane copies into consuming namespaces.
//
// So the sync server never serves a namespace anything that flagplane would
// not also have rendered into that namespace. A reference resolves only to a
// flag set that exists, so another namespace's subscriber is refused while
// the flag set is missing, as when no grant permits it: a refusal tells
// nothing about what exists elsewhere. (Subscribers that were entitled when
// it was deleted keep their streams and are served an empty flag set; see
// the package documentation.)
func Entitled(v *topology.View, namespace string, flagSet topology.Key) bool {
	if flagSet.Namespace == namespace {
		return true
	}
	for _, s := range v.SourcesOfFlagSet(flagSet) {
		if s.Namespace == namespace {
			return true
		}
	}
	return false
}

// entitledNamespaces lists the namespaces other than its own that may read a
// flag set, for checking many subscribers at once.
func entitledNamespaces(v *topology.View, flagSet topology.Key) map[string]struct{} {
	out := map[string]struct{}{}
	for _, s := range v.SourcesOfFlagSet(flagSet) {
		out[s.Namespace] = struct{}{}
	}
	return out
}
