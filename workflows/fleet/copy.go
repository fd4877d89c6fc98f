package fleet

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// Copy is the FeatureFlag the hub writes into a member for placement: the
// hub's spec, in the same namespace and name, labelled with the placement.
// The hub's labels and annotations stay on the hub: a member's own
// policies select by what the member's teams write.
func Copy(hub *v1beta1.FeatureFlag, placement string) *v1beta1.FeatureFlag {
	return &v1beta1.FeatureFlag{
		TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "FeatureFlag"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   hub.Namespace,
			Name:        hub.Name,
			Labels:      map[string]string{fleetv1alpha1.PlacementLabel: placement},
			Annotations: map[string]string{fleetv1alpha1.PlacedRevisionAnnotation: Revision(hub)},
		},
		Spec: *hub.Spec.DeepCopy(),
	}
}

// Edited says whether a member's copy was changed in the member since the
// hub last wrote it: its content no longer has the revision the hub wrote.
func Edited(member *v1beta1.FeatureFlag) bool {
	return Revision(member) != member.Annotations[fleetv1alpha1.PlacedRevisionAnnotation]
}

// Placed says whether member is a copy that placement wrote.
func Placed(member *v1beta1.FeatureFlag, placement string) bool {
	return member.Labels[fleetv1alpha1.PlacementLabel] == placement
}

// Revision is the revision a FeatureFlag serves: the content hash every
// cluster computes alike from the same spec, so that the hub's and a
// member's agree without asking each other. A spec that does not render
// has none.
func Revision(ff *v1beta1.FeatureFlag) string {
	_, rev, err := flagsets.Serve(ff)
	if err != nil {
		return ""
	}
	return rev
}

// with returns m plus key=value, for an update that keeps a member copy's
// other labels and annotations.
func with(m map[string]string, key, value string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[key] = value
	return out
}
