package controllers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-logr/logr"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// A reconciliation that could not decide yet and must run again after a
// while returns workflows.RequeueAfter: it is neither logged as an error nor
// counted as one, and it does not grow the key's failure backoff (which
// would reach minutes while a cache lags for seconds, a watch cut and listed
// again).

// cacheBehindDelay is how long a status reconcile whose cache has not seen
// its own last write waits before it runs again.
const cacheBehindDelay = 50 * time.Millisecond

// reconcileTimeout bounds one reconciliation (its API requests included):
// a request that hangs fails, and the key is retried with backoff.
const reconcileTimeout = time.Minute

// workQueue is the queue of one workflow, run by a controller-runtime typed
// controller: keys are deduplicated while waiting, a key is never processed
// by two workers at once, failures are retried with exponential backoff
// (unless terminal), a panic is a failure, and controller-runtime's
// controller_runtime_reconcile_* and workqueue_* metrics are kept under the
// workflow's name.
//
// The keys come from topology Deltas, not from informers, so the controller
// has no source: the queue is made here, before the controller starts, and
// Add puts keys on it directly. Keys added before the controller starts
// (during the startup pass) wait on it, as they would on any queue.
type workQueue[T comparable] struct {
	name      string
	queue     workqueue.TypedRateLimitingInterface[T]
	ctrl      controller.TypedController[T]
	reconcile func(ctx context.Context, key T) error
	observe   func(queue string, d time.Duration, err error)
	pending   pending[T]
	// ended, when set, hears of every reconciliation of a key that ended,
	// after pending has counted it.
	ended func(key T)
}

func newWorkQueue[T comparable](logger logr.Logger, name string, workers int, reconcileKey func(context.Context, T) error) *workQueue[T] {
	rateLimiter := workqueue.DefaultTypedControllerRateLimiter[T]()
	q := &workQueue[T]{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter,
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name}),
	}
	q.reconcile = func(ctx context.Context, key T) error {
		err := q.pending.run(key, func() error { return q.reconcileSafely(ctx, key, reconcileKey) })
		if q.ended != nil {
			q.ended(key)
		}
		return err
	}
	logger = logger.WithValues("workflow", name)
	ctrl, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[T]{
		Reconciler:              reconcile.TypedFunc[T](q.reconcileKey),
		MaxConcurrentReconciles: max(workers, 1),
		RateLimiter:             rateLimiter,
		NewQueue: func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
			return q.queue
		},
		UsePriorityQueue:      ptr.To(false),
		ReconciliationTimeout: reconcileTimeout,
		// Each manager of a process (tests, the demo) has its own queues of
		// these names.
		SkipNameValidation: ptr.To(true),
		LogConstructor: func(key *T) logr.Logger {
			if key == nil {
				return logger
			}
			return logger.WithValues(logValues(*key)...)
		},
	})
	if err != nil {
		// Only a missing reconciler or name is refused, and both are set above.
		panic(fmt.Sprintf("creating the %s controller: %v", name, err))
	}
	q.ctrl = ctrl
	return q
}

// Add enqueues a key.
func (q *workQueue[T]) Add(key T) {
	q.pending.added(key)
	q.queue.Add(key)
}

// AddAfter enqueues a key once d has passed; it counts as pending (Idle)
// from now on.
func (q *workQueue[T]) AddAfter(key T, d time.Duration) {
	q.pending.added(key)
	q.queue.AddAfter(key, d)
}

// Len is the number of keys waiting.
func (q *workQueue[T]) Len() int { return q.queue.Len() }

// run processes keys until ctx is done.
func (q *workQueue[T]) run(ctx context.Context) {
	if err := q.ctrl.Start(ctx); err != nil {
		log.FromContext(ctx).Error(err, "workflow controller stopped", "workflow", q.name)
	}
}

// reconcileKey is the controller's reconciler: a workflow's error becomes
// the controller's answer (RequeueAfter a result, not a failure).
func (q *workQueue[T]) reconcileKey(ctx context.Context, key T) (reconcile.Result, error) {
	start := time.Now()
	err := q.reconcile(ctx, key)
	var later workflows.RequeueAfter
	isLater := errors.As(err, &later)
	if q.observe != nil {
		observed := err
		if isLater {
			observed = nil
		}
		q.observe(q.name, time.Since(start), observed)
	}
	if isLater {
		log.FromContext(ctx).V(1).Info("not done yet, will run again", "reason", err.Error(), "after", time.Duration(later).String())
		return reconcile.Result{RequeueAfter: time.Duration(later)}, nil
	}
	return reconcile.Result{}, err
}

// process reconciles one key outside the controller (the startup pass, before
// the controller starts) and puts it on the queue again where the controller
// would: after a failure (with backoff) or when asked to run again later.
func (q *workQueue[T]) process(ctx context.Context, key T) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("workflow", q.name).WithValues(logValues(key)...))
	res, err := q.reconcileKey(ctx, key)
	switch {
	case err == nil && res.RequeueAfter > 0:
		q.queue.AddAfter(key, res.RequeueAfter)
	case err == nil:
	case errors.Is(err, reconcile.TerminalError(nil)):
		log.FromContext(ctx).Error(err, "giving up on key: retrying cannot fix it")
	default:
		log.FromContext(ctx).Error(err, "reconcile failed, will retry")
		q.queue.AddRateLimited(key)
	}
}

// reconcileSafely turns a panic of a reconcile into an error, so that one
// bad key is retried with backoff and its pending count stays right.
func (q *workQueue[T]) reconcileSafely(ctx context.Context, key T, reconcileKey func(context.Context, T) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in the %s workflow: %v\n%s", q.name, r, debug.Stack())
		}
	}()
	return reconcileKey(ctx, key)
}

// logValues are the keys that name the object of a queue's key in the
// logs, as every workflow names it (workflows.LogKey): its kind, and its
// namespace/name.
func logValues(key any) []any {
	switch k := key.(type) {
	case topology.Key:
		kind, ref := workflows.LogKey(k)
		return []any{kind, ref}
	case client.ObjectKey:
		return []any{"ConfigMap", klog.KRef(k.Namespace, k.Name)}
	}
	return []any{"key", key}
}
