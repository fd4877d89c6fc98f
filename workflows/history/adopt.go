package history

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// adopt returns the revisions of all that ff controls, adopting on the way
// those that have no controller (left by a FeatureFlag of the name deleted
// with --cascade=orphan, whose ownerReferences the garbage collector
// removed), as a Deployment adopts orphaned ReplicaSets: ff becomes their
// controller, and they are its history, counted and pruned like the rest.
// Only a revision whose spec renders to the hash it claims is adopted
// (HoldsWhatItClaims): one that does not was never flagplane's record. A
// revision controlled by another object (an earlier FeatureFlag of the
// name that the garbage collector has yet to delete it with) is left to
// the garbage collector; it only takes a number.
func (r *Reconciler) adopt(ctx context.Context, ff *v1beta1.FeatureFlag, all []*deliveryv1alpha1.FeatureFlagRevision) ([]*deliveryv1alpha1.FeatureFlagRevision, error) {
	var owned []*deliveryv1alpha1.FeatureFlagRevision
	for _, rev := range all {
		if ownedBy(rev, ff.UID) {
			owned = append(owned, rev)
			continue
		}
		if metav1.GetControllerOf(rev) != nil || !HoldsWhatItClaims(rev) {
			continue
		}
		adopted := rev.DeepCopy()
		adopted.OwnerReferences = append(adopted.OwnerReferences, controllerRef(ff))
		// With the resourceVersion read: a revision changed meanwhile (by
		// another adoption) is not taken over.
		err := r.Client.Patch(ctx, adopted, client.MergeFromWithOptions(rev, client.MergeFromWithOptimisticLock{}))
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("adopting revision %s/%s: %w", rev.Namespace, rev.Name, err)
		}
		log.FromContext(ctx).V(1).Info("revision adopted", "revision", rev.Name, "number", rev.Spec.Number, "hash", rev.Spec.Revision)
		owned = append(owned, adopted)
	}
	return owned, nil
}
