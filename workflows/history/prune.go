package history

import (
	"fmt"
	"strconv"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// DefaultLimit is how many revisions of a flag set flagplane keeps
// where neither its annotation nor the manager's --revision-history-limit
// says otherwise, as a Deployment's revisionHistoryLimit.
const DefaultLimit = 10

// Limit is how many revisions of a flag set to keep: its
// RevisionHistoryLimitAnnotation when that is a non-negative integer, else
// fallback. A value that is not is an error (the caller warns, and keeps
// fallback's).
func Limit(annotations map[string]string, fallback int) (int, error) {
	v, ok := annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation]
	if !ok {
		return fallback, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fallback, fmt.Errorf("annotation %s=%q is not a non-negative integer: keeping %d revisions",
			deliveryv1alpha1.RevisionHistoryLimitAnnotation, v, fallback)
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
