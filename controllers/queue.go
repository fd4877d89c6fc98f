package controllers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// workQueue is the queue of one workflow: keys are deduplicated while
// waiting, a key is never processed by two workers at once, and failures are
// retried with exponential backoff (unless terminal).
type workQueue[T comparable] struct {
	name      string
	queue     workqueue.TypedRateLimitingInterface[T]
	reconcile func(ctx context.Context, key T) error
	workers   int
	observe   func(queue string, d time.Duration, err error)
	pending   pending[T]
}

func newWorkQueue[T comparable](name string, workers int, reconcile func(context.Context, T) error) *workQueue[T] {
	q := &workQueue[T]{
		name:    name,
		workers: workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[T](),
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name},
		),
	}
	q.reconcile = func(ctx context.Context, key T) error {
		return q.pending.run(key, func() error { return reconcile(ctx, key) })
	}
	return q
}

// Add enqueues a key.
func (q *workQueue[T]) Add(key T) {
	q.pending.added(key)
	q.queue.Add(key)
}

// Len is the number of keys waiting.
func (q *workQueue[T]) Len() int { return q.queue.Len() }

// run processes keys until ctx is done.
func (q *workQueue[T]) run(ctx context.Context) {
	defer q.queue.ShutDown()
	for range q.workers {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for q.processNext(ctx) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

func (q *workQueue[T]) processNext(ctx context.Context) bool {
	key, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(key)
	q.process(ctx, key)
	return true
}

// process reconciles one key and decides whether it is retried.
func (q *workQueue[T]) process(ctx context.Context, key T) {
	logger := log.FromContext(ctx).WithValues("workflow", q.name, "key", key)
	start := time.Now()
	err := q.reconcileSafely(log.IntoContext(ctx, logger), key)
	var later workflows.RequeueAfter
	if q.observe != nil {
		observed := err
		if errors.As(err, &later) {
			observed = nil
		}
		q.observe(q.name, time.Since(start), observed)
	}
	switch {
	case err == nil:
		q.queue.Forget(key)
	case errors.As(err, &later):
		logger.V(1).Info("not done yet, will run again", "reason", err.Error(), "after", time.Duration(later).String())
		q.queue.Forget(key)
		q.queue.AddAfter(key, time.Duration(later))
	case errors.Is(err, reconcile.TerminalError(nil)):
		logger.Error(err, "giving up on key: retrying cannot fix it")
		q.queue.Forget(key)
	default:
		logger.Error(err, "reconcile failed, will retry")
		q.queue.AddRateLimited(key)
	}
}

// reconcileSafely turns a panic of a reconcile into an error, so that one
// bad key is retried with backoff instead of ending the process.
func (q *workQueue[T]) reconcileSafely(ctx context.Context, key T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in the %s workflow: %v\n%s", q.name, r, debug.Stack())
		}
	}()
	return q.reconcile(ctx, key)
}
