// Package fleet is the fleet hub's workflow: it places a FeatureFlag of the
// hub onto the member clusters a FeatureFlagPlacement selects, and reports,
// per cluster, which revision the member's copy holds and whether the
// member's own flagplane confirms that its pods serve it.
//
// The rules are pure functions of what the hub reads, so that they can be
// tested without clusters:
//
//   - Select (select.go) picks the clusters of a placement among the
//     inventory's ClusterProfiles, and says which of them the placement's
//     namespace is granted (FleetGrants of the inventory's namespace).
//   - Copy, Revision and Edited (copy.go) are the copy the hub writes into
//     a member, the content hash both sides compute alike, and whether a
//     member's copy was edited there since the hub wrote it.
//   - Begin, Planned and Advance (rollout.go) stage an edit cluster by
//     cluster under a FeatureFlagRolloutPolicy whose steps select clusters.
//   - Observe (state.go) is what the hub says of one cluster.
//
// Reconciler (reconciler.go) applies them: it writes, corrects or deletes
// the copies through the members' clients, under the hub's identity on each
// member, and writes the placement's status.
package fleet
