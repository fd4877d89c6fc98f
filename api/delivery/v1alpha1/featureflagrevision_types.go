package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// FeatureFlagRevisionSpec is one accepted spec of a FeatureFlag. It never
// changes once made.
type FeatureFlagRevisionSpec struct {
	// FlagSet is the name of the FeatureFlag, in the revision's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	FlagSet string `json:"flagSet"`

	// Number orders the revisions of a flag set: 1 is the first flagplane
	// recorded, and every accepted change of the spec, a rollback
	// included, gets the next one.
	// +kubebuilder:validation:Minimum=1
	Number int64 `json:"number"`

	// Revision is the content hash of the flag set as flagplane serves it,
	// the one the FeatureFlag's status.revision shows.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Revision string `json:"revision"`

	// FlagSpec is the FeatureFlag's spec.flagSpec as it was accepted.
	FlagSpec v1beta1.FlagSpec `json:"flagSpec"`

	// CreatedBy is the user who wrote the spec, in the API server's own
	// word: the FeatureFlag's SpecAuthorAnnotation, which flagplane's
	// mutating webhook sets to the request's user (userInfo.username) on
	// every write that changes the spec, and keeps on every other write.
	// Empty for a spec written while the webhook was not installed, or
	// recorded by a manager that serves no webhooks.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	CreatedBy string `json:"createdBy,omitempty"`

	// FieldManager is the field manager of the FeatureFlag's newest write
	// (metadata.managedFields, not counting status): the name the client
	// gave itself (kubectl-client-side-apply, kubectl-edit,
	// argocd-controller, flagplane-rollback, ...). Any client may give any
	// name: it says which tool, as its user claims, not who.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	FieldManager string `json:"fieldManager,omitempty"`

	// ChangeCause is the FeatureFlag's delivery.flagplane.dev/change-cause
	// annotation when the spec was accepted.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ChangeCause string `json:"changeCause,omitempty"`
}

// FeatureFlagRevision is one accepted spec of a FeatureFlag, as a
// ControllerRevision is one pod template of a workload: flagplane records
// it, owned by the FeatureFlag, named "<flag set>-<number>", and deletes
// the oldest beyond the flag set's history limit. `flagplane history`
// lists them, `flagplane rollback` applies one again, and a rollout
// returns consumers to one.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ffrev
// +kubebuilder:printcolumn:name="Flag set",type=string,JSONPath=`.spec.flagSet`
// +kubebuilder:printcolumn:name="Number",type=integer,JSONPath=`.spec.number`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="By",type=string,JSONPath=`.spec.createdBy`
// +kubebuilder:printcolumn:name="Field manager",type=string,JSONPath=`.spec.fieldManager`,priority=1
// +kubebuilder:printcolumn:name="Cause",type=string,JSONPath=`.spec.changeCause`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FeatureFlagRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the revision; it cannot be changed.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a FeatureFlagRevision is immutable: its spec cannot change"
	Spec FeatureFlagRevisionSpec `json:"spec"`
}

// FeatureFlagRevisionList is a list of FeatureFlagRevision.
//
// +kubebuilder:object:root=true
type FeatureFlagRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureFlagRevision `json:"items"`
}
