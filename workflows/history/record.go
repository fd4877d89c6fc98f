package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// record creates the revision of hash unless the newest of owned has it,
// and returns owned with it, and when to reconcile again (after a spec not
// recorded). behind says to reconcile again once the cache has caught up.
//
// Its number is one more than the highest of all, which holds the
// revisions of the flag set that are not its own too (an earlier
// FeatureFlag's, which the garbage collector has yet to delete): they take
// numbers, and are never in the way of one. A name taken by a revision of
// the flag set the cache has not listed yet asks to reconcile again once it
// has (behind); a name taken by a revision of
// another flag set (a name cut to fit, or a revision written by hand) is
// passed over: the next number is tried.
//
// Before it creates, it deletes what pruning would delete once the new
// revision is there (limit, keep: Prunable), so that a flag set whose
// history is full never holds more than its limit, not even for a moment:
// a namespace at its ResourceQuota or at NamespaceLimit still records the
// edits of such a flag set. A revision that would add one to a namespace
// that holds NamespaceLimit is not recorded; neither is one the API server
// refuses for good (a quota, a policy, its size: workflows.PermanentFailure).
// Either is remembered for status (Unrecorded), told once per cause by a
// Warning Event, and tried again later, twice as late each time (retry),
// or at once when a revision of the namespace changes or the FeatureFlag
// does. The FeatureFlag is served all the same: nothing reads its history
// to serve it.
func (r *Reconciler) record(ctx context.Context, ff, author *v1beta1.FeatureFlag, hash string,
	all, owned []*deliveryv1alpha1.FeatureFlagRevision, limit int, keep []string) (_ []*deliveryv1alpha1.FeatureFlagRevision, retry time.Duration, behind bool, _ error) {
	// A revision recorded before revisions had 128 bits holds the first
	// 12 hex digits of the same content's hash (topology.SameRevision):
	// the same spec, not a new one.
	if n := len(owned); n > 0 && topology.SameRevision(owned[n-1].Spec.Revision, hash) {
		r.recorded(ff)
		return owned, 0, false, nil
	}
	number := int64(1)
	if n := len(all); n > 0 {
		number = all[n-1].Spec.Number + 1
	}
	// The field manager of the revision before: of two writes in one
	// second, the other manager's is the newer (FieldManager). A revision
	// recorded before spec.fieldManager existed held it in createdBy.
	previous := ""
	if n := len(owned); n > 0 {
		previous = cmp.Or(owned[n-1].Spec.FieldManager, owned[n-1].Spec.CreatedBy)
	}
	next := &deliveryv1alpha1.FeatureFlagRevision{Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{Number: number, Revision: hash}}
	room := Prunable(append(append([]*deliveryv1alpha1.FeatureFlagRevision{}, owned...), next), limit, keep)
	if full, err := r.namespaceFull(ctx, ff.Namespace, len(room)); err != nil {
		return owned, 0, false, err
	} else if full {
		return owned, r.notRecorded(ctx, ff, deliveryv1alpha1.ReasonNamespaceRevisionLimit, fmt.Sprintf(
			"namespace %s holds %d FeatureFlagRevisions, the manager's --revision-namespace-limit: the spec flagplane accepted "+
				"and serves is not recorded in the history of FeatureFlag %s (lower the revision-history-limit of FeatureFlags of the namespace, "+
				"or delete FeatureFlags or revisions)", ff.Namespace, r.NamespaceLimit, ff.Name)), false, nil
	}
	if err := r.delete(ctx, room, limit); err != nil {
		return owned, 0, false, err
	}
	owned = without(owned, room)
	logger := log.FromContext(ctx)
	for range maxNamesTaken {
		want := Desired(author, hash, number, previous, r.TrustSpecAuthor)
		err := r.Client.Create(ctx, want)
		switch {
		case err == nil:
			logger.V(1).Info("revision recorded", "revision", want.Name, "number", number, "hash", hash,
				"createdBy", want.Spec.CreatedBy, "fieldManager", want.Spec.FieldManager, "changeCause", want.Spec.ChangeCause)
			r.recorded(ff)
			r.created(types.NamespacedName{Namespace: ff.Namespace, Name: ff.Name}, want.Name)
			return append(owned, want), 0, false, nil
		case apierrors.IsAlreadyExists(err):
			have := &deliveryv1alpha1.FeatureFlagRevision{}
			getErr := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
			switch {
			case getErr == nil && sameRevision(have, want) && ownedBy(have, ff.UID):
				// A retry of a create that took effect, or a reconcile
				// that raced this one: the same revision is success.
				r.recorded(ff)
				return append(owned, have), 0, false, nil
			case getErr == nil && have.Spec.FlagSet != ff.Name:
				logger.V(1).Info("the name of the next revision is another flag set's: passing its number over",
					"revision", want.Name, "number", number, "flagSet", have.Spec.FlagSet)
				number++
				continue
			}
			logger.V(1).Info("the name of the next revision is taken by one the cache has not listed yet: trying again",
				"revision", want.Name, "number", number)
			return owned, 0, true, nil
		case refused(err):
			return owned, r.notRecorded(ctx, ff, deliveryv1alpha1.ReasonRevisionRefused,
				workflows.WriteFailed(workflows.ObjectRef{Kind: deliveryv1alpha1.FeatureFlagRevisionKind, Namespace: want.Namespace, Name: want.Name}, err).Error()), false, nil
		default:
			return owned, 0, false, fmt.Errorf("recording revision %d of %s/%s: %w", number, ff.Namespace, ff.Name, err)
		}
	}
	return owned, 0, false, fmt.Errorf("recording a revision of %s/%s: the names of %d numbers up to %d are taken by revisions of other flag sets",
		ff.Namespace, ff.Name, maxNamesTaken, number)
}

// maxNamesTaken bounds the numbers record passes over in one reconcile.
const maxNamesTaken = 16

// refused tells whether the API server refused a create for good: trying
// again at once changes nothing (a ResourceQuota's "exceeded quota", a
// policy, an object too large; etcd's "request is too large", which the API
// server does not give a reason of its own).
func refused(err error) bool {
	if workflows.PermanentFailure(err) {
		return true
	}
	var status apierrors.APIStatus
	return errors.As(err, &status) && strings.Contains(status.Status().Message, "request is too large")
}

// namespaceFull tells whether a revision that comes with freed deleted ones
// of its flag set would pass NamespaceLimit. The count is the cache's: a few
// revisions recorded at once, or just now, can pass the bound by as many.
func (r *Reconciler) namespaceFull(ctx context.Context, namespace string, freed int) (bool, error) {
	if r.NamespaceLimit <= 0 {
		return false, nil
	}
	var list deliveryv1alpha1.FeatureFlagRevisionList
	// Counted, not read: no copy of every spec of the namespace.
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("counting the revisions of namespace %s: %w", namespace, err)
	}
	return len(list.Items)-freed+1 > r.NamespaceLimit, nil
}

// notRecorded remembers why ff's spec is not recorded, warns when that is
// new, and says when to try again.
func (r *Reconciler) notRecorded(ctx context.Context, ff *v1beta1.FeatureFlag, reason, message string) time.Duration {
	key := types.NamespacedName{Namespace: ff.Namespace, Name: ff.Name}
	if r.unrecorded().Set(topology.FlagSetKey(ff.Namespace, ff.Name), workflows.Unrecorded{Reason: reason, Message: message}) {
		workflows.Warn(r.Events, ff, EventRevisionNotRecorded, ActionRecord, "%s", message)
	}
	attempts := 0
	if v, ok := r.attempts.Load(key); ok {
		attempts = v.(int)
	}
	r.attempts.Store(key, attempts+1)
	after := r.retry(attempts)
	log.FromContext(ctx).V(1).Info("revision not recorded", "reason", reason, "message", message, "retryAfter", after)
	return after
}

// recorded forgets that ff's spec was not recorded.
func (r *Reconciler) recorded(ff *v1beta1.FeatureFlag) {
	r.attempts.Delete(types.NamespacedName{Namespace: ff.Namespace, Name: ff.Name})
	r.unrecorded().Clear(topology.FlagSetKey(ff.Namespace, ff.Name))
}

// retry is how long to wait after attempts failed attempts before: the
// first wait RetryAfter, doubled each time, at most MaxRetryAfter.
func (r *Reconciler) retry(attempts int) time.Duration {
	base, most := r.RetryAfter, r.MaxRetryAfter
	if base <= 0 {
		base = DefaultRetryAfter
	}
	if most <= 0 {
		most = DefaultMaxRetryAfter
	}
	d := base
	for range attempts {
		if d >= most/2 {
			return most
		}
		d *= 2
	}
	return min(d, most)
}

// without is revs less those of gone.
func without(revs, gone []*deliveryv1alpha1.FeatureFlagRevision) []*deliveryv1alpha1.FeatureFlagRevision {
	if len(gone) == 0 {
		return revs
	}
	out := make([]*deliveryv1alpha1.FeatureFlagRevision, 0, len(revs))
	for _, r := range revs {
		deleted := false
		for _, g := range gone {
			deleted = deleted || g == r
		}
		if !deleted {
			out = append(out, r)
		}
	}
	return out
}
