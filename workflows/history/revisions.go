package history

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// FlagSetIndex is the field index of FeatureFlagRevisions by spec.flagSet
// (IndexRevisions), which List reads.
const FlagSetIndex = "spec.flagSet"

// IndexRevisions indexes FeatureFlagRevisions by their flag set, for List.
// Call it before the manager starts.
func IndexRevisions(ctx context.Context, indexer client.FieldIndexer) error {
	err := indexer.IndexField(ctx, &deliveryv1alpha1.FeatureFlagRevision{}, FlagSetIndex, func(o client.Object) []string {
		return []string{o.(*deliveryv1alpha1.FeatureFlagRevision).Spec.FlagSet}
	})
	if err != nil {
		return fmt.Errorf("indexing FeatureFlagRevisions by flag set: %w", err)
	}
	return nil
}

// List returns the revisions of the flag set namespace/flagSet that
// reader holds, oldest (lowest number) first. reader is a cache indexed
// with IndexRevisions; the items are the cache's own: do not modify them.
func List(ctx context.Context, reader client.Reader, namespace, flagSet string) ([]*deliveryv1alpha1.FeatureFlagRevision, error) {
	var list deliveryv1alpha1.FeatureFlagRevisionList
	if err := reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{FlagSetIndex: flagSet}); err != nil {
		return nil, fmt.Errorf("listing the revisions of %s/%s: %w", namespace, flagSet, err)
	}
	return Sorted(list.Items), nil
}

// Sorted returns pointers to items, lowest number first (then by name, for
// a history someone wrote by hand with two revisions of one number).
func Sorted(items []deliveryv1alpha1.FeatureFlagRevision) []*deliveryv1alpha1.FeatureFlagRevision {
	out := make([]*deliveryv1alpha1.FeatureFlagRevision, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	slices.SortFunc(out, func(a, b *deliveryv1alpha1.FeatureFlagRevision) int {
		return cmp.Or(cmp.Compare(a.Spec.Number, b.Spec.Number), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Desired is revision number of ff's spec, whose rendering has the content
// hash revision: named, labelled and owned as every revision, its author
// the API server's word (CreatedBy; trusted says that flagplane's webhook
// vouches for it), its field manager read from ff's managedFields
// (FieldManager, previous being that of the revision before) and its cause
// from ff's ChangeCauseAnnotation. ff is the object as of the write that
// made its spec (the graph's), whose metadata say who wrote it and why.
func Desired(ff *v1beta1.FeatureFlag, revision string, number int64, previous string, trusted bool) *deliveryv1alpha1.FeatureFlagRevision {
	return &deliveryv1alpha1.FeatureFlagRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: deliveryv1alpha1.GroupVersion.String(), Kind: deliveryv1alpha1.FeatureFlagRevisionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      RevisionName(ff.Name, number),
			Namespace: ff.Namespace,
			Labels:    map[string]string{deliveryv1alpha1.FlagSetLabel: FlagSetLabelValue(ff.Name)},
			// Deleting the FeatureFlag deletes its history (the garbage
			// collector); only a revision the FeatureFlag controls is its
			// own (the graph, the command line).
			OwnerReferences: []metav1.OwnerReference{controllerRef(ff)},
		},
		Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{
			FlagSet:      ff.Name,
			Number:       number,
			Revision:     revision,
			FlagSpec:     *ff.Spec.FlagSpec.DeepCopy(),
			CreatedBy:    CreatedBy(ff, trusted),
			FieldManager: FieldManager(ff.ManagedFields, previous),
			ChangeCause:  cut(ff.Annotations[deliveryv1alpha1.ChangeCauseAnnotation], changeCauseMaxLength),
		},
	}
}

// controllerRef makes ff the controller of a revision.
func controllerRef(ff *v1beta1.FeatureFlag) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1beta1.GroupVersion.String(),
		Kind:       v1beta1.FeatureFlagKind,
		Name:       ff.Name,
		UID:        ff.UID,
		Controller: ptr.To(true),
	}
}

// ContentRevision is the revision r's flagSpec renders to: the content
// hash the graph gives that spec (flagsets.Render, flagsets.Revision).
func ContentRevision(r *deliveryv1alpha1.FeatureFlagRevision) (string, error) {
	content, err := flagsets.Render(&v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Spec.FlagSet},
		Spec: v1beta1.FeatureFlagSpec{FlagSpec: r.Spec.FlagSpec}})
	if err != nil {
		return "", err
	}
	return flagsets.Revision(content), nil
}

// HoldsWhatItClaims tells whether r's flagSpec renders to the revision its
// spec.revision claims (topology.SameRevision: a 12-digit revision of an
// earlier version is the full one it begins). What flagplane records
// always does; anyone who may create a FeatureFlagRevision can write one
// that does not.
func HoldsWhatItClaims(r *deliveryv1alpha1.FeatureFlagRevision) bool {
	got, err := ContentRevision(r)
	return err == nil && topology.SameRevision(got, r.Spec.Revision)
}

// sameRevision tells whether have records what want does: the same flag
// set, number and hash (the hash is of the content the spec renders to).
func sameRevision(have, want *deliveryv1alpha1.FeatureFlagRevision) bool {
	return have.Spec.FlagSet == want.Spec.FlagSet && have.Spec.Number == want.Spec.Number && have.Spec.Revision == want.Spec.Revision
}

// ownedBy tells whether uid is the controller of r.
func ownedBy(r *deliveryv1alpha1.FeatureFlagRevision, uid types.UID) bool {
	ref := metav1.GetControllerOf(r)
	return ref != nil && ref.UID == uid && ref.Kind == v1beta1.FeatureFlagKind
}
