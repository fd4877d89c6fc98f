package syncserver

import (
	"github.com/flagplane/flagplane/topology"
)

// Entitled tells whether the workloads of namespace may read flagSet from the
// sync server: exactly when flagplane would deliver that flag set into their
// namespace by any path (topology.View.MayRead): it is their namespace's, or
// a source of their namespace resolves it, or a source of another namespace
// that their workloads' annotations name — with a ReferenceGrant for every
// hop that crosses a namespace — resolves it.
//
// So the sync server never serves a namespace anything that flagplane would
// not also have rendered into that namespace. A reference resolves only to a
// flag set that exists, so another namespace's subscriber is refused while
// the flag set is missing, as when no grant permits it: a refusal tells
// nothing about what exists elsewhere. (Subscribers that were entitled when
// it was deleted keep their streams and are served an empty flag set; see
// the package documentation.)
func Entitled(v *topology.View, namespace string, flagSet topology.Key) bool {
	return v.MayRead(namespace, flagSet)
}

// entitledNamespaces lists the namespaces other than its own that may read a
// flag set, for checking many subscribers at once.
func entitledNamespaces(v *topology.View, flagSet topology.Key) map[string]struct{} {
	out := map[string]struct{}{}
	for _, ns := range v.ReaderNamespaces(flagSet) {
		out[ns] = struct{}{}
	}
	return out
}
