package history

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// The history adopts revisions left without a controller by a FeatureFlag
// deleted with --cascade=orphan: it patches their ownerReferences, which
// config/policy admits and nothing else of a revision (its spec is
// immutable by the CRD's own rule).
// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrevisions,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrolloutpolicies,verbs=get;list;watch

// Name is the controller's name, in its logs and in controller-runtime's
// metrics (controller="history").
const Name = "history"

// Event reasons and actions of the history.
const (
	// EventInvalidHistoryLimit: the FeatureFlag's
	// RevisionHistoryLimitAnnotation is not a non-negative integer.
	EventInvalidHistoryLimit = "InvalidRevisionHistoryLimit"
)

// cacheBehindDelay is how long a reconcile waits for what the cache or
// the graph has not seen yet (its own last write; a FeatureFlag the cache
// holds that the graph's informer handler has not taken yet): usually
// milliseconds.
const cacheBehindDelay = 100 * time.Millisecond

// Graph is what the history reads of the topology.
type Graph interface {
	Snapshot() *topology.View
}

// Reconciler records the accepted specs of a FeatureFlag and prunes its
// history (see the package doc). One key is a FeatureFlag.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Graph renders flag sets: what a FeatureFlag serves, and whether it
	// is accepted.
	Graph Graph
	// Events receives InvalidRevisionHistoryLimit on the FeatureFlag; nil
	// sends none. A revision recorded is no Event: the revision is the
	// record, and an edit writes nothing more than it must.
	Events events.EventRecorder
	// DefaultLimit is how many revisions to keep of a flag set without a
	// valid RevisionHistoryLimitAnnotation (--revision-history-limit).
	DefaultLimit int
	// Workers reconcile FeatureFlags at once (default 2).
	Workers int

	// warned is, per FeatureFlag, the invalid limit it was warned about:
	// one Event per value, not one per reconcile.
	warned sync.Map
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// SetupWithManager indexes revisions by flag set and registers the
// controller: a FeatureFlag is reconciled when it changes, when one of its
// revisions does and when a rollout policy that targets it does. It runs
// on the leader only.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager) error {
	if err := IndexRevisions(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	workers := r.Workers
	if workers <= 0 {
		workers = 2
	}
	err := builder.ControllerManagedBy(mgr).Named(Name).
		For(&v1beta1.FeatureFlag{}).
		// By spec.flagSet rather than by owner: a revision without a
		// controller (one to adopt) is its flag set's business too.
		Watches(&deliveryv1alpha1.FeatureFlagRevision{}, handler.EnqueueRequestsFromMapFunc(revisionToFlagSet)).
		Watches(&deliveryv1alpha1.FeatureFlagRolloutPolicy{}, handler.EnqueueRequestsFromMapFunc(policyToFlagSet)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			RecoverPanic:            ptr.To(true),
			NeedLeaderElection:      ptr.To(true),
			// Each manager of a process (tests, the demo) has its own.
			SkipNameValidation: ptr.To(true),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the revision history: %w", err)
	}
	return nil
}

// revisionToFlagSet maps a revision to the FeatureFlag of its spec.flagSet,
// whoever controls it.
func revisionToFlagSet(_ context.Context, obj client.Object) []reconcile.Request {
	rev, ok := obj.(*deliveryv1alpha1.FeatureFlagRevision)
	if !ok || rev.Spec.FlagSet == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rev.Namespace, Name: rev.Spec.FlagSet}}}
}

// policyToFlagSet maps a rollout policy to the FeatureFlag it targets: the
// revisions its status names are kept.
func policyToFlagSet(_ context.Context, obj client.Object) []reconcile.Request {
	p, ok := obj.(*deliveryv1alpha1.FeatureFlagRolloutPolicy)
	if !ok || p.Spec.TargetRef.Kind != v1beta1.FeatureFlagKind || p.Spec.TargetRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.TargetRef.Name}}}
}

// Reconcile records the FeatureFlag's spec when it is accepted and not the
// newest revision yet, then prunes its history.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ff := &v1beta1.FeatureFlag{}
	if err := r.Client.Get(ctx, req.NamespacedName, ff); err != nil {
		if apierrors.IsNotFound(err) {
			// Its revisions go with it: the garbage collector deletes them.
			r.warned.Delete(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading FeatureFlag %s: %w", req.NamespacedName, err)
	}
	if ff.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	v := r.Graph.Snapshot()
	rendered, ok := v.RenderedOf(ff)
	if !ok {
		// The graph takes the object in an informer handler of its own,
		// apart from this controller's: its rendering is on its way.
		return reconcile.Result{RequeueAfter: cacheBehindDelay}, nil
	}
	// Who wrote the spec and why: the object as of the write that made
	// the spec, which the graph holds (a later metadata-only write does
	// not replace it there).
	author := ff
	if held, ok := v.FlagSet(topology.FlagSetKey(ff.Namespace, ff.Name)); ok && held.UID == ff.UID {
		author = held
	}
	all, err := List(ctx, r.Client, ff.Namespace, ff.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	owned, err := r.adopt(ctx, ff, all)
	if err != nil {
		return reconcile.Result{}, err
	}
	if rendered.Valid() && rendered.Content != "" {
		var behind bool
		if owned, behind, err = r.record(ctx, ff, author, rendered.Revision, all, owned); err != nil {
			return reconcile.Result{}, err
		}
		if behind {
			return reconcile.Result{RequeueAfter: cacheBehindDelay}, nil
		}
	}
	return reconcile.Result{}, r.prune(ctx, ff, rendered, owned)
}

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

// record creates the revision of hash unless the newest of owned has it,
// and returns owned with it. Its number is one more than the highest of
// all, which holds the revisions of the flag set that are not its own too
// (an earlier FeatureFlag's, which the garbage collector has yet to
// delete): they take numbers, and are never in the way of one. behind says
// that the name of the number is taken by a revision of the flag set the
// cache has not listed yet: reconcile again once it has. A name taken by a
// revision of another flag set (a name cut to fit, or a revision written by
// hand) is passed over: the next number is tried.
func (r *Reconciler) record(ctx context.Context, ff, author *v1beta1.FeatureFlag, hash string,
	all, owned []*deliveryv1alpha1.FeatureFlagRevision) (_ []*deliveryv1alpha1.FeatureFlagRevision, behind bool, _ error) {
	// A revision recorded before revisions had 128 bits holds the first
	// 12 hex digits of the same content's hash (topology.SameRevision):
	// the same spec, not a new one.
	if n := len(owned); n > 0 && topology.SameRevision(owned[n-1].Spec.Revision, hash) {
		return owned, false, nil
	}
	number := int64(1)
	if n := len(all); n > 0 {
		number = all[n-1].Spec.Number + 1
	}
	previous := ""
	if n := len(owned); n > 0 {
		previous = owned[n-1].Spec.CreatedBy
	}
	logger := log.FromContext(ctx)
	for range maxNamesTaken {
		want := Desired(author, hash, number, previous)
		err := r.Client.Create(ctx, want)
		switch {
		case err == nil:
			logger.V(1).Info("revision recorded", "revision", want.Name, "number", number, "hash", hash,
				"createdBy", want.Spec.CreatedBy, "changeCause", want.Spec.ChangeCause)
			return append(owned, want), false, nil
		case apierrors.IsAlreadyExists(err):
			have := &deliveryv1alpha1.FeatureFlagRevision{}
			getErr := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
			switch {
			case getErr == nil && sameRevision(have, want) && ownedBy(have, ff.UID):
				// A retry of a create that took effect, or a reconcile
				// that raced this one: the same revision is success.
				return append(owned, have), false, nil
			case getErr == nil && have.Spec.FlagSet != ff.Name:
				logger.V(1).Info("the name of the next revision is another flag set's: passing its number over",
					"revision", want.Name, "number", number, "flagSet", have.Spec.FlagSet)
				number++
				continue
			}
			logger.V(1).Info("the name of the next revision is taken by one the cache has not listed yet: trying again",
				"revision", want.Name, "number", number)
			return owned, true, nil
		default:
			return owned, false, fmt.Errorf("recording revision %d of %s/%s: %w", number, ff.Namespace, ff.Name, err)
		}
	}
	return owned, false, fmt.Errorf("recording a revision of %s/%s: the names of %d numbers up to %d are taken by revisions of other flag sets",
		ff.Namespace, ff.Name, maxNamesTaken, number)
}

// maxNamesTaken bounds the numbers record passes over in one reconcile.
const maxNamesTaken = 16

// prune deletes the revisions of owned beyond the flag set's limit, but
// those a reader needs: the one it serves (when its spec is invalid, its
// consumers keep the newest revision) and those a rollout policy's status
// names.
func (r *Reconciler) prune(ctx context.Context, ff *v1beta1.FeatureFlag, rendered topology.Rendered,
	owned []*deliveryv1alpha1.FeatureFlagRevision) error {
	limit, err := Limit(ff.Annotations, r.DefaultLimit)
	r.warnLimit(ff, err)
	if len(owned) <= limit {
		return nil
	}
	var keep []string
	switch {
	case rendered.Valid() && rendered.Revision != "":
		keep = append(keep, rendered.Revision)
	case len(owned) > 0:
		keep = append(keep, owned[len(owned)-1].Spec.Revision)
	}
	var policies deliveryv1alpha1.FeatureFlagRolloutPolicyList
	if err := r.Client.List(ctx, &policies, client.InNamespace(ff.Namespace)); err != nil {
		return fmt.Errorf("listing the rollout policies of namespace %s: %w", ff.Namespace, err)
	}
	for _, p := range policies.Items {
		for _, h := range []string{p.Status.StableRevision, p.Status.TargetRevision} {
			if h != "" {
				keep = append(keep, h)
			}
		}
	}
	logger := log.FromContext(ctx)
	for _, rev := range Prunable(owned, limit, keep) {
		err := r.Client.Delete(ctx, rev, client.Preconditions{UID: &rev.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting revision %s/%s: %w", rev.Namespace, rev.Name, err)
		}
		logger.V(1).Info("revision pruned", "revision", rev.Name, "number", rev.Spec.Number, "hash", rev.Spec.Revision, "limit", limit)
	}
	return nil
}

// warnLimit sends a Warning Event for an invalid limit, once per value.
func (r *Reconciler) warnLimit(ff *v1beta1.FeatureFlag, err error) {
	key := types.NamespacedName{Namespace: ff.Namespace, Name: ff.Name}
	if err == nil {
		r.warned.Delete(key)
		return
	}
	value := ff.Annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation]
	if prev, ok := r.warned.Load(key); ok && prev == value {
		return
	}
	r.warned.Store(key, value)
	workflows.Warn(r.Events, ff, EventInvalidHistoryLimit, workflows.ActionValidate, "%s", err.Error())
}
