// Package v1alpha1 holds flagplane's fleet.flagplane.dev/v1alpha1 API, the
// kinds of a fleet hub: one cluster that places flag sets onto many.
//
//   - FeatureFlagPlacement attaches to a FeatureFlag of the hub
//     (spec.targetRef, after Gateway API's GEP-713) and places a copy of
//     it, in the same namespace (SIG-Multicluster's namespace sameness),
//     onto each member cluster that its clusterSelector picks among the
//     inventory's ClusterProfiles. Its status says, per cluster, which
//     revision the member's copy holds and whether the member's own
//     flagplane has confirmed that its pods serve it.
//   - FleetGrant, in the inventory's namespace beside the ClusterProfiles,
//     grants hub namespaces to member clusters: a placement reaches only
//     the clusters granted to its namespace.
//
// These kinds live on the hub only. Members run flagplane as a single
// cluster does, and never read them.
//
// +kubebuilder:object:generate=true
// +groupName=fleet.flagplane.dev
package v1alpha1
