package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The scheme is built with apimachinery alone, as api/v1beta1's is, so that
// the pure packages (topology) may import these types.
var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "policy.flagplane.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// FeatureFlagSourcePolicyKind is the kind's name, as used in locators,
// events and status.
const FeatureFlagSourcePolicyKind = "FeatureFlagSourcePolicy"

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &FeatureFlagSourcePolicy{}, &FeatureFlagSourcePolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Conditions and reasons of a FeatureFlagSourcePolicy (see the package doc).
const (
	ConditionAccepted = "Accepted"
	ConditionEnforced = "Enforced"
	// The summary conditions, as on core.openfeature.dev's kinds:
	// Ready follows Accepted (a policy not accepted is Stalled).
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"

	ReasonAccepted   = "Accepted"
	ReasonInvalid    = "Invalid"
	ReasonEnforced   = "Enforced"
	ReasonOverridden = "Overridden"
	ReasonNoSidecars = "NoSidecars"
	ReasonReady      = "Ready"
)
