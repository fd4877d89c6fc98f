package history

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// DefaultLimit is how many revisions of a flag set flagplane keeps
// where neither its annotation nor the manager's --revision-history-limit
// says otherwise, as a Deployment's revisionHistoryLimit.
const DefaultLimit = 10

// MaxLimit is the most revisions of one flag set flagplane keeps, whatever
// its RevisionHistoryLimitAnnotation says; --revision-history-limit may not
// be more either. Each revision holds a whole spec, up to the size of the
// FeatureFlag itself: without a bound, one annotation could have a
// namespace hold thousands of copies of a large flag set.
const MaxLimit = 100

// Limit is how many revisions of a flag set to keep: its
// RevisionHistoryLimitAnnotation when that is a non-negative integer, at
// most MaxLimit, else fallback. A value that is no such integer, or more
// than MaxLimit, is an error (the caller warns) with the limit that
// applies: fallback, or MaxLimit.
func Limit(annotations map[string]string, fallback int) (int, error) {
	v, ok := annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation]
	if !ok {
		return fallback, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil && errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
		// A number too large for an int is more than MaxLimit too.
		n, err = MaxLimit+1, nil
	}
	if err != nil || n < 0 {
		return fallback, fmt.Errorf("annotation %s=%q is not a non-negative integer: keeping %d revisions",
			deliveryv1alpha1.RevisionHistoryLimitAnnotation, v, fallback)
	}
	if n > MaxLimit {
		return MaxLimit, fmt.Errorf("annotation %s=%q is more than the %d revisions flagplane keeps of a flag set: keeping %d",
			deliveryv1alpha1.RevisionHistoryLimitAnnotation, v, MaxLimit, MaxLimit)
	}
	return n, nil
}

// Prunable are the revisions to delete so that at most limit remain, the
// oldest first, of revisions sorted by number. A revision whose hash is one
// of keep (the one the flag set serves, those a rollout names) is never
// deleted: the newest revision of each such hash stays, however many that
// leaves; an older one of the same hash (a spec applied again) is history
// like any other. Hashes are compared with topology.SameRevision: a
// revision recorded with the 12 hex digits of an earlier version is the
// full hash it begins, and the other way round.
func Prunable(revisions []*deliveryv1alpha1.FeatureFlagRevision, limit int, keep []string) []*deliveryv1alpha1.FeatureFlagRevision {
	excess := len(revisions) - max(limit, 0)
	if excess <= 0 {
		return nil
	}
	kept := map[int]bool{}
	// seen is, per hash of keep, whether its newest revision is kept yet.
	seen := make([]bool, len(keep))
	for i := len(revisions) - 1; i >= 0; i-- {
		h := revisions[i].Spec.Revision
		for j, k := range keep {
			if !seen[j] && topology.SameRevision(h, k) {
				kept[i] = true
				seen[j] = true
			}
		}
	}
	var out []*deliveryv1alpha1.FeatureFlagRevision
	for i, r := range revisions {
		if len(out) == excess {
			break
		}
		if !kept[i] {
			out = append(out, r)
		}
	}
	return out
}

// keep are the hashes whose newest revision pruning leaves: the one the
// flag set serves (when its spec is invalid, its consumers keep the newest
// revision's) and those a rollout policy's status names.
func (r *Reconciler) keep(ctx context.Context, ff *v1beta1.FeatureFlag, rendered topology.Rendered,
	owned []*deliveryv1alpha1.FeatureFlagRevision) ([]string, error) {
	var keep []string
	switch {
	case rendered.Valid() && rendered.Revision != "":
		keep = append(keep, rendered.Revision)
	case len(owned) > 0:
		keep = append(keep, owned[len(owned)-1].Spec.Revision)
	}
	var policies deliveryv1alpha1.FeatureFlagRolloutPolicyList
	if err := r.Client.List(ctx, &policies, client.InNamespace(ff.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the rollout policies of namespace %s: %w", ff.Namespace, err)
	}
	for _, p := range policies.Items {
		for _, h := range []string{p.Status.StableRevision, p.Status.TargetRevision} {
			if h != "" {
				keep = append(keep, h)
			}
		}
	}
	return keep, nil
}

// prune deletes the revisions of owned beyond the flag set's limit, but
// the newest of each hash of keep.
func (r *Reconciler) prune(ctx context.Context, owned []*deliveryv1alpha1.FeatureFlagRevision, limit int, keep []string) error {
	if len(owned) <= limit {
		return nil
	}
	return r.delete(ctx, Prunable(owned, limit, keep), limit)
}

// delete deletes revs, each only if it is still the object read (its UID).
func (r *Reconciler) delete(ctx context.Context, revs []*deliveryv1alpha1.FeatureFlagRevision, limit int) error {
	logger := log.FromContext(ctx)
	for _, rev := range revs {
		err := r.Client.Delete(ctx, rev, client.Preconditions{UID: &rev.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting revision %s/%s: %w", rev.Namespace, rev.Name, err)
		}
		logger.V(1).Info("revision pruned", "revision", rev.Name, "number", rev.Spec.Number, "hash", rev.Spec.Revision, "limit", limit)
	}
	return nil
}
