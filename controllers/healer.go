package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// The healer (webhooks.Healer) rolls workloads whose pods were admitted
// without their injection. Its queue is one of the controllers', named
// HealerQueue and keyed by workload, run on the leader with the others,
// once the graph is whole. It is fed by the Pod line of the kinds table
// (a pod whose annotations say it may lack its injection), by the
// workloads of every Delta, and by every pod again each resync.

// HealerQueue is the healer's queue: its logs, and the controller label of
// controller-runtime's controller_runtime_reconcile_* and workqueue_*
// metrics.
const HealerQueue = "healer"

// Healer heals workloads.
type Healer interface {
	// Heal restarts the workload if one of its pods lacks its injection,
	// and returns when to look again if a backoff holds the restart back.
	Heal(ctx context.Context, w topology.Key) (time.Duration, error)
	// NeedsLook tells, by its annotations, whether a pod may lack its
	// injection.
	NeedsLook(pod *corev1.Pod) bool
	// WorkloadsChanged hears the workloads of every Delta before they are
	// queued; it must return at once.
	WorkloadsChanged(workloads []topology.Key)
}

// healing is the healer's part of the Controller.
type healing struct {
	healer Healer
	queue  *workQueue[topology.Key]
	// resync is how often every pod is looked at again.
	resync time.Duration
	// pods lists the pods of a resync (the manager's cache).
	pods client.Reader
}

// AddHealer puts h on a queue of its own with workers workers, which
// looks at every pod again each resync. Call it once, before the manager
// starts.
func (c *Controller) AddHealer(h Healer, resync time.Duration, workers int) {
	if workers <= 0 {
		workers = c.opts.Workers
	}
	c.heal = &healing{healer: h, resync: resync, pods: c.cache,
		queue: newWorkQueue(c.log, HealerQueue, workers, func(ctx context.Context, w topology.Key) error {
			retryIn, err := h.Heal(ctx, w)
			if err == nil && retryIn > 0 {
				return workflows.RequeueAfter(retryIn)
			}
			return err
		})}
	c.OnWorkloadsChanged(func(workloads []topology.Key) {
		h.WorkloadsChanged(workloads)
		for _, w := range workloads {
			c.heal.queue.Add(w)
		}
	})
}

// podToHeal puts the workload of a pod that may lack its injection on the
// healer's queue.
func (c *Controller) podToHeal(pod *corev1.Pod) {
	if c.heal == nil || !c.ready.Load() || !c.heal.healer.NeedsLook(pod) {
		return // before the start-up pass is over, runHealer looks at every pod
	}
	if res := c.owners.WorkloadOf(context.Background(), pod.Namespace, pod); res.OK {
		c.heal.queue.Add(res.Workload)
	}
}

// runHealer looks at every pod (their events before the start-up pass
// was over were not taken: their owners may not have been in the cache
// yet), serves the healer's queue and looks at every pod again each
// resync, until ctx is done.
func (c *Controller) runHealer(ctx context.Context) {
	if c.heal == nil {
		return
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("workflow", HealerQueue))
	c.resyncHeals(ctx)
	go c.heal.queue.run(ctx)
	if c.heal.resync <= 0 {
		return
	}
	t := time.NewTicker(c.heal.resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.resyncHeals(ctx)
		}
	}
}

// resyncHeals puts the workload of every pod that needs a look on the
// healer's queue.
func (c *Controller) resyncHeals(ctx context.Context) {
	var pods corev1.PodList
	if err := c.heal.pods.List(ctx, &pods); err != nil {
		log.FromContext(ctx).Error(err, "listing pods from the cache")
		return
	}
	for i := range pods.Items {
		c.podToHeal(&pods.Items[i])
	}
}
