package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FeatureFlagPlacementSpec says which FeatureFlag of the hub goes to which
// member clusters.
type FeatureFlagPlacementSpec struct {
	// TargetRef is the FeatureFlag to place, in the placement's namespace.
	// Its copy in a member has the same namespace and name.
	TargetRef FlagSetTargetReference `json:"targetRef"`

	// ClusterSelector selects ClusterProfiles of the inventory by their
	// labels. An empty selector selects every cluster; the grants of the
	// placement's namespace still apply.
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`

	// Drift is what the hub does with a member's copy whose spec was
	// changed by someone else: Correct writes the hub's spec back (the
	// default), Report leaves it and reports the cluster as Drifted.
	// +optional
	// +kubebuilder:default=Correct
	// +kubebuilder:validation:Enum=Correct;Report
	Drift DriftPolicy `json:"drift,omitempty"`
}

// DriftPolicy is what the hub does with a copy edited in the member.
type DriftPolicy string

// The drift policies.
const (
	DriftCorrect DriftPolicy = "Correct"
	DriftReport  DriftPolicy = "Report"
)

// FlagSetTargetReference names the FeatureFlag a placement attaches to, as
// Gateway API's LocalPolicyTargetReference does.
type FlagSetTargetReference struct {
	// Group is core.openfeature.dev.
	// +kubebuilder:validation:Enum=core.openfeature.dev
	Group string `json:"group"`
	// Kind is FeatureFlag.
	// +kubebuilder:validation:Enum=FeatureFlag
	Kind string `json:"kind"`
	// Name is the FeatureFlag's name, in the placement's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ClusterState is what the hub knows of one selected cluster.
type ClusterState string

// The states of a cluster in a placement's status.
const (
	// ClusterCurrent: the member's copy holds the planned revision, and the
	// member's flagplane says its consumers serve it (its Ready).
	ClusterCurrent ClusterState = "Current"
	// ClusterBehind: the copy is written, or being written, and the member
	// does not confirm the planned revision yet.
	ClusterBehind ClusterState = "Behind"
	// ClusterDrifted: the member's copy was changed by someone other than
	// the hub; with drift Report the hub leaves it.
	ClusterDrifted ClusterState = "Drifted"
	// ClusterUnknown: the hub cannot reach the member. The member keeps
	// serving what it has; LastHeard says since when the hub knows nothing.
	ClusterUnknown ClusterState = "Unknown"
	// ClusterNotGranted: the placement's namespace is not granted this
	// cluster; nothing is written there.
	ClusterNotGranted ClusterState = "NotGranted"
	// ClusterConflict: the member has a FeatureFlag of that name that the
	// hub did not place; the hub does not take it over.
	ClusterConflict ClusterState = "Conflict"
)

// ClusterPlacementStatus is one selected cluster of a placement.
type ClusterPlacementStatus struct {
	// Cluster is the ClusterProfile's name.
	Cluster string `json:"cluster"`
	// State summarises the cluster, see ClusterState.
	// +kubebuilder:validation:Enum=Current;Behind;Drifted;Unknown;NotGranted;Conflict
	State ClusterState `json:"state"`
	// Planned is the revision the hub plans for the cluster: the hub's
	// FeatureFlag's, or, while a fleet rollout has not reached the
	// cluster's step (or after a halt), the stable one.
	// +optional
	Planned string `json:"planned,omitempty"`
	// Revision is the revision the member's copy holds, as the member's
	// flagplane reports it (the copy's status.revision).
	// +optional
	Revision string `json:"revision,omitempty"`
	// Delivered and Confirmed are the member copy's status.delivered and
	// status.confirmed, as the member's flagplane wrote them.
	// +optional
	Delivered string `json:"delivered,omitempty"`
	// +optional
	Confirmed string `json:"confirmed,omitempty"`
	// LastHeard is when the hub last heard from the member's API server.
	// +optional
	LastHeard *metav1.Time `json:"lastHeard,omitempty"`
	// Message says why the cluster is not Current.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// FeatureFlagPlacementStatus is what the hub knows of the placement.
type FeatureFlagPlacementStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Revision is the hub's FeatureFlag's revision: what Current means.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Current is "<current>/<selected>" over the selected clusters.
	// +optional
	Current string `json:"current,omitempty"`
	// Clusters lists the selected clusters, those not Current first.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Clusters []ClusterPlacementStatus `json:"clusters,omitempty"`
	// Conditions: Accepted (the target exists and is valid) and Ready
	// (every selected, granted cluster is Current).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FeatureFlagPlacement places a FeatureFlag of the hub onto the member
// clusters its selector picks, and reports what each serves.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ffplace
// +kubebuilder:printcolumn:name="Flag set",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.current`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FeatureFlagPlacement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FeatureFlagPlacementSpec   `json:"spec"`
	Status FeatureFlagPlacementStatus `json:"status,omitempty"`
}

// FeatureFlagPlacementList is a list of FeatureFlagPlacements.
//
// +kubebuilder:object:root=true
type FeatureFlagPlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureFlagPlacement `json:"items"`
}
