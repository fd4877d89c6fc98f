package history

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// RevisionHistoryLimitAnnotation is not a non-negative integer, or is
	// more than MaxLimit.
	EventInvalidHistoryLimit = "InvalidRevisionHistoryLimit"
	// EventRevisionNotRecorded: the spec flagplane accepted is not
	// recorded (the namespace's bound of revisions, a refusal of the API
	// server); once per cause.
	EventRevisionNotRecorded = "RevisionNotRecorded"
	// ActionRecord is the action of the history's Events.
	ActionRecord = "Record"
)

// Defaults of the Reconciler.
const (
	// DefaultNamespaceLimit is how many FeatureFlagRevisions a namespace
	// may hold before flagplane records no more there
	// (--revision-namespace-limit).
	DefaultNamespaceLimit = 1000
	// DefaultRetryAfter and DefaultMaxRetryAfter bound how soon a spec
	// that was not recorded is tried again: twice as late each time.
	DefaultRetryAfter    = 2 * time.Second
	DefaultMaxRetryAfter = 5 * time.Minute
)

// cacheBehindDelay is how long a reconcile waits for what the cache has
// not seen yet (its own last write): usually milliseconds.
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
	// Events receives InvalidRevisionHistoryLimit and RevisionNotRecorded
	// on the FeatureFlag; nil sends none. A revision recorded is no Event:
	// the revision is the record, and an edit writes nothing more than it
	// must.
	Events events.EventRecorder
	// DefaultLimit is how many revisions to keep of a flag set without a
	// valid RevisionHistoryLimitAnnotation (--revision-history-limit).
	DefaultLimit int
	// NamespaceLimit is how many FeatureFlagRevisions a namespace may hold:
	// at it, no revision that would add one is recorded there
	// (--revision-namespace-limit); 0 is no bound.
	NamespaceLimit int
	// Unrecorded receives why a FeatureFlag's accepted spec is not
	// recorded, for its status; nil keeps it to the reconciler (its Events
	// still go out once per cause).
	Unrecorded *workflows.UnrecordedRevisions
	// RetryAfter is how soon a spec that was not recorded is tried again,
	// doubled at each attempt up to MaxRetryAfter (defaults
	// DefaultRetryAfter, DefaultMaxRetryAfter). A revision deleted in its
	// namespace, or an edit, tries again at once.
	RetryAfter, MaxRetryAfter time.Duration
	// TrustSpecAuthor says that flagplane's mutating webhook is served
	// (the manager's --webhooks): the FeatureFlag's SpecAuthorAnnotation is
	// the API server's word, and revisions record it as createdBy. Without
	// it, anyone who may edit a FeatureFlag could write the annotation, and
	// createdBy stays empty.
	TrustSpecAuthor bool

	// warned is, per FeatureFlag, the invalid limit it was warned about:
	// one Event per value, not one per reconcile.
	warned sync.Map
	// attempts is, per FeatureFlag whose spec was not recorded, how many
	// times in a row it was not (the backoff).
	attempts sync.Map
	// own is Unrecorded when that is nil.
	own workflows.UnrecordedRevisions
	// pending is, per FeatureFlag, the revision it created that the cache
	// has not listed yet (see awaiting).
	pending sync.Map
}

// pendingRevision is a revision created and not seen in the cache yet.
type pendingRevision struct {
	name string
	at   time.Time
}

// pendingTimeout is how long a reconcile waits for the cache to list a
// revision it created before it reads the cache as the truth again (the
// revision was deleted before the cache saw it).
const pendingTimeout = 30 * time.Second

var _ reconcile.Reconciler = (*Reconciler)(nil)

// The history is reconciled on a queue of the controllers (fed by the
// graph's Deltas, which name a FeatureFlag once the graph holds its
// rendering) on the leader only. Besides the Deltas, the controllers put
// a FeatureFlag on it when an update the graph does not read changes what
// the history reads (its annotations), and for the revisions and rollout
// policies that concern it (FlagSetsOfRevision, FlagSetOfPolicy). The
// revisions must be indexed by flag set (IndexRevisions) for List.

// FlagSetsOfRevision are the FeatureFlags a revision's event concerns: the
// FeatureFlag of its spec.flagSet, whoever controls it (its own, or one
// to adopt), and the FeatureFlags of its namespace whose spec is not
// recorded (a deletion may make room). It also tells the reconciler that
// the cache holds the revision (see awaiting).
func (r *Reconciler) FlagSetsOfRevision(rev *deliveryv1alpha1.FeatureFlagRevision) []topology.Key {
	var out []topology.Key
	if rev.Spec.FlagSet != "" {
		r.seen(types.NamespacedName{Namespace: rev.Namespace, Name: rev.Spec.FlagSet}, rev.Name)
		out = append(out, topology.FlagSetKey(rev.Namespace, rev.Spec.FlagSet))
	}
	for _, k := range r.unrecorded().InNamespace(rev.Namespace) {
		if k.Name != rev.Spec.FlagSet {
			out = append(out, k)
		}
	}
	return out
}

// FlagSetOfPolicy is the FeatureFlag a rollout policy targets: the
// revisions its status names are kept.
func FlagSetOfPolicy(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) (topology.Key, bool) {
	if p.Spec.TargetRef.Kind != v1beta1.FeatureFlagKind || p.Spec.TargetRef.Name == "" {
		return topology.Key{}, false
	}
	return topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name), true
}

// unrecorded is where the reconciler remembers the specs it did not
// record: Unrecorded, or its own.
func (r *Reconciler) unrecorded() *workflows.UnrecordedRevisions {
	if r.Unrecorded != nil {
		return r.Unrecorded
	}
	return &r.own
}

// Reconcile adopts the FeatureFlag's orphaned revisions, records its spec
// when it is accepted and not the newest revision yet, then prunes its
// history.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ff := &v1beta1.FeatureFlag{}
	if err := r.Client.Get(ctx, req.NamespacedName, ff); err != nil {
		if apierrors.IsNotFound(err) {
			// Its revisions go with it: the garbage collector deletes them.
			r.warned.Delete(req.NamespacedName)
			r.attempts.Delete(req.NamespacedName)
			r.unrecorded().Clear(topology.FlagSetKey(req.Namespace, req.Name))
			r.pending.Delete(req.NamespacedName)
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
		// The graph has not taken this spec yet: the Delta of its edit
		// puts the FeatureFlag on the queue again once it has.
		return reconcile.Result{}, nil
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
	if r.awaiting(req.NamespacedName, all) {
		// Its own last create is not in the cache yet: what the cache
		// lists is one revision behind, and a create from it would ask
		// the API server for what it has.
		return reconcile.Result{RequeueAfter: cacheBehindDelay}, nil
	}
	owned, err := r.adopt(ctx, ff, all)
	if err != nil {
		return reconcile.Result{}, err
	}
	limit, err := Limit(ff.Annotations, r.DefaultLimit)
	r.warnLimit(ff, err)
	keep, err := r.keep(ctx, ff, rendered, owned)
	if err != nil {
		return reconcile.Result{}, err
	}
	var retry time.Duration
	if rendered.Valid() && rendered.Content != "" {
		var behind bool
		if owned, retry, behind, err = r.record(ctx, ff, author, rendered.Revision, all, owned, limit, keep); err != nil {
			return reconcile.Result{}, err
		}
		if behind {
			return reconcile.Result{RequeueAfter: cacheBehindDelay}, nil
		}
	}
	return reconcile.Result{RequeueAfter: retry}, r.prune(ctx, owned, limit, keep)
}

// created remembers that key's revision name was created: until the cache
// lists it, the FeatureFlag's history is behind (awaiting).
func (r *Reconciler) created(key types.NamespacedName, name string) {
	r.pending.Store(key, pendingRevision{name: name, at: time.Now()})
}

// seen forgets key's pending revision once the cache has it: the informer
// hands an object to handlers after its store holds it.
func (r *Reconciler) seen(key types.NamespacedName, name string) {
	if v, ok := r.pending.Load(key); ok && v.(pendingRevision).name == name {
		r.pending.CompareAndDelete(key, v)
	}
}

// awaiting tells whether key's last created revision is neither in all
// (the cache's listing) nor older than pendingTimeout.
func (r *Reconciler) awaiting(key types.NamespacedName, all []*deliveryv1alpha1.FeatureFlagRevision) bool {
	v, ok := r.pending.Load(key)
	if !ok {
		return false
	}
	p := v.(pendingRevision)
	for _, rev := range all {
		if rev.Name == p.name {
			r.pending.CompareAndDelete(key, v)
			return false
		}
	}
	if time.Since(p.at) > pendingTimeout {
		r.pending.CompareAndDelete(key, v)
		return false
	}
	return true
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
