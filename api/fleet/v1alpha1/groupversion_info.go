package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "fleet.flagplane.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kinds of this group.
const (
	FeatureFlagPlacementKind = "FeatureFlagPlacement"
	FleetGrantKind           = "FleetGrant"
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&FeatureFlagPlacement{}, &FeatureFlagPlacementList{},
		&FleetGrant{}, &FleetGrantList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Labels the hub puts on the copies it writes into a member.
const (
	// PlacementLabel on a member's FeatureFlag names the hub's
	// FeatureFlagPlacement (in the same namespace) that placed it. The hub
	// deletes, updates and reports only copies that carry it, and its
	// admission policy on the member refuses its writes of any other.
	PlacementLabel = "fleet.flagplane.dev/placement"

	// PlacedRevisionAnnotation on a member's copy is the revision of the
	// spec the hub last wrote there: a copy whose content no longer has
	// that revision was edited in the member (drift). It is the hub's
	// record of its own write on an object it owns, in the one place that
	// a member and the hub both see; which placement owns which copy is
	// PlacementLabel.
	PlacedRevisionAnnotation = "fleet.flagplane.dev/placed-revision"
)

// FieldManager is the field manager of the hub's writes into members.
const FieldManager = "flagplane-fleet"
