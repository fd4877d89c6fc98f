package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/flagplane/flagplane/topology"
)

// HealerName is the healer's controller: its logs, and the controller and
// name labels of controller-runtime's controller_runtime_reconcile_* and
// workqueue_* metrics.
const HealerName = "healer"

const (
	// defaultHealWorkers is Healer.Workers when it is not set.
	defaultHealWorkers = 2
	// healTimeout bounds one heal (its API requests included): a request
	// that hangs fails, and the workload is retried with backoff.
	healTimeout = time.Minute
	// graphPoll is how often the healer looks whether the graph is built
	// before its workers start.
	graphPoll = 100 * time.Millisecond
)

var _ reconcile.TypedReconciler[topology.Key] = (*Healer)(nil)

// Reconcile heals one workload; the controller calls it with the workloads
// of pod events, Deltas and resyncs. A restart that the backoff holds back
// is looked at again when the backoff ends.
func (h *Healer) Reconcile(ctx context.Context, w topology.Key) (reconcile.Result, error) {
	retryIn, err := h.Heal(ctx, w)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("healing %s: %w", w, err)
	}
	return reconcile.Result{RequeueAfter: retryIn}, nil
}

// SetupWithManager adds the healer to mgr as the controller HealerName,
// which runs on the leader only: restarting workloads is a write.
func (h *Healer) SetupWithManager(mgr manager.Manager) error {
	opts := h.controllerOptions(mgr.GetLogger())
	opts.DefaultFromConfig(mgr.GetControllerOptions())
	c, err := h.newController(opts)
	if err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("adding the healer: %w", err)
	}
	return nil
}

// controllerOptions are the healer's: the rate-limited queue, panic
// recovery and per-reconcile timeout of every flagplane queue
// (controllers/queue.go), Workers workers.
func (h *Healer) controllerOptions(logger logr.Logger) controller.TypedOptions[topology.Key] {
	logger = logger.WithValues("controller", HealerName)
	workers := h.Workers
	if workers <= 0 {
		workers = defaultHealWorkers
	}
	return controller.TypedOptions[topology.Key]{
		Reconciler:              h,
		MaxConcurrentReconciles: workers,
		RateLimiter:             workqueue.DefaultTypedControllerRateLimiter[topology.Key](),
		UsePriorityQueue:        ptr.To(false),
		RecoverPanic:            ptr.To(true),
		ReconciliationTimeout:   healTimeout,
		NeedLeaderElection:      ptr.To(true),
		// Each manager of a process (tests, the demo) has its own healer.
		SkipNameValidation: ptr.To(true),
		LogConstructor: func(w *topology.Key) logr.Logger {
			if w == nil {
				return logger
			}
			return logger.WithValues("workload", w.String())
		},
	}
}

// newController makes the healer's controller and its sources: the pods
// that need a look as their events arrive, the workloads of every Delta
// (WorkloadsChanged), and every pod again each Resync. Its workers start
// once the graph is built.
func (h *Healer) newController(opts controller.TypedOptions[topology.Key]) (controller.TypedController[topology.Key], error) {
	c, err := controller.NewTypedUnmanaged(HealerName, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the healer: %w", err)
	}
	pods := source.TypedKind(h.Cache, &corev1.Pod{}, handler.TypedFuncs[*corev1.Pod, topology.Key]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[topology.Key]) {
			h.enqueuePod(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[topology.Key]) {
			h.enqueuePod(ctx, q, e.ObjectNew)
		},
	})
	for _, src := range []source.TypedSource[topology.Key]{pods, &healerFeed{h: h, logger: c.GetLogger()}} {
		if err := c.Watch(src); err != nil {
			return nil, fmt.Errorf("watching for the healer: %w", err)
		}
	}
	return c, nil
}

func (h *Healer) enqueuePod(ctx context.Context, q workqueue.TypedInterface[topology.Key], pod *corev1.Pod) {
	if !needsLook(pod) {
		return
	}
	if res := h.Resolver.WorkloadOf(ctx, pod.Namespace, pod); res.OK {
		q.Add(res.Workload)
	}
}

// healerFeed is the healer's source of what no informer says: the
// workloads of Deltas, which WorkloadsChanged puts on the queue while the
// controller runs, and every pod each Resync. It is synced once the graph
// holds the whole cache, so that no workload is healed against a partial
// graph; until then, keys wait on the queue.
type healerFeed struct {
	h      *Healer
	logger logr.Logger
}

var _ source.TypedSyncingSource[topology.Key] = (*healerFeed)(nil)

func (f *healerFeed) String() string { return "healer: Deltas and resyncs" }

// Start hands the queue to WorkloadsChanged and resyncs every Resync until
// ctx is done. The pod source's initial list covers the pods that exist
// when the controller starts.
func (f *healerFeed) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[topology.Key]) error {
	h := f.h
	if h.Resync <= 0 {
		return errors.New("the healer needs a Resync period")
	}
	h.mu.Lock()
	h.queue = q
	h.mu.Unlock()
	ctx = log.IntoContext(ctx, f.logger)
	go func() {
		t := time.NewTicker(h.Resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				h.mu.Lock()
				h.queue = nil
				h.mu.Unlock()
				return
			case <-t.C:
				h.resync(ctx, q)
			}
		}
	}()
	return nil
}

// WaitForSync waits until the graph is built.
func (f *healerFeed) WaitForSync(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, graphPoll, true, func(context.Context) (bool, error) {
		return f.h.Graph.GraphBuilt(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the graph to be built: %w", err)
	}
	return nil
}

// resync puts the workload of every pod that needs a look on q.
func (h *Healer) resync(ctx context.Context, q workqueue.TypedInterface[topology.Key]) {
	var pods corev1.PodList
	if err := h.Cache.List(ctx, &pods); err != nil {
		log.FromContext(ctx).Error(err, "listing pods from the cache")
		return
	}
	for i := range pods.Items {
		h.enqueuePod(ctx, q, &pods.Items[i])
	}
}
