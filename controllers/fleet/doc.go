// Package fleet runs a fleet hub: the controllers that engage the member
// clusters of SIG-Multicluster's inventory (ClusterProfiles, reached
// through their access providers) and place FeatureFlags onto them
// (workflows/fleet).
//
//   - members.go engages one cluster.Cluster per ClusterProfile that a
//     FleetGrant grants some namespace, in multicluster-runtime's registry
//     of clusters, with a cache of the member's FeatureFlags in the granted
//     namespaces only (the hub's identity there may read no more), and
//     probes the member's API server so that a cut-off member shows as
//     Unknown rather than by its stale cache.
//   - hub.go wires the inventory and placement controllers into a
//     controller-runtime manager of the hub, and feeds the placement queue
//     from the hub's objects and from the members' FeatureFlags.
//   - engine.go is the seam for another source of members than the
//     inventory's (Options.Engine), such as a harness that simulates many.
package fleet
