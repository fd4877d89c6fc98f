package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The scheme is built with apimachinery alone, so that the pure packages
// (topology) that import these types pull in neither client-go nor
// controller-runtime.
var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "core.openfeature.dev", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names, as used in locators, events and status.
const (
	FeatureFlagKind            = "FeatureFlag"
	FeatureFlagSourceKind      = "FeatureFlagSource"
	InProcessConfigurationKind = "InProcessConfiguration"
	FlagdKind                  = "Flagd"
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&FeatureFlag{}, &FeatureFlagList{},
		&FeatureFlagSource{}, &FeatureFlagSourceList{},
		&InProcessConfiguration{}, &InProcessConfigurationList{},
		&Flagd{}, &FlagdList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
