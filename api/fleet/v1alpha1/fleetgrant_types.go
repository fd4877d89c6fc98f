package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetGrantSpec grants hub namespaces to member clusters.
type FleetGrantSpec struct {
	// Namespaces are the hub namespaces granted: their placements may place
	// into the same namespace of the selected clusters.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	Namespaces []string `json:"namespaces"`

	// ClusterSelector selects the granted clusters among the ClusterProfiles
	// of the inventory's namespace, by their labels.
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`
}

// FleetGrant lets the placements of some hub namespaces reach some
// clusters. Only a FleetGrant of the inventory's namespace, beside the
// ClusterProfiles, counts: whoever may write ClusterProfiles there decides
// who reaches which cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=fgrant
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FleetGrantSpec `json:"spec"`
}

// FleetGrantList is a list of FleetGrants.
//
// +kubebuilder:object:root=true
type FleetGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetGrant `json:"items"`
}
