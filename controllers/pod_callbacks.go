package controllers

import (
	"context"
	"sync"

	"github.com/flagplane/flagplane/workflows"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flagplane/flagplane/topology"
)

// Workloads other than Deployments, StatefulSets and DaemonSets (a Job, a
// CronJob, a bare ReplicaSet, an Argo Rollout...) are known to the graph
// through their pods, as the OpenFeature Operator knows them: flagplane has
// no informer of every kind that may own pods. Such a workload is in the
// graph while it has pods, with the annotations and service account of its
// last pod seen.

// podOwners remembers the workload of every pod that stands for one.
type podOwners struct {
	mu    sync.Mutex
	owner map[types.NamespacedName]topology.Key
	pods  map[topology.Key]int
}

func (c *Controller) podHandler() typedHandler[*corev1.Pod] {
	return typedHandler[*corev1.Pod]{
		onAdd: func(pod *corev1.Pod) {
			c.onPodChanged(pod)
			c.podToConfirm(pod)
			c.podToHeal(pod)
		},
		onUpdate: func(old, new *corev1.Pod) {
			c.onPodChanged(new)
			c.podToHeal(new)
			if old.Status.PodIP != new.Status.PodIP || podReady(old) != podReady(new) || new.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
				c.podToConfirm(new)
			}
		},
		onDelete: func(pod *corev1.Pod) {
			c.onPodDeleted(pod)
			if c.confirmer != nil {
				c.confirmer.Prober.Forget(string(pod.UID))
			}
			c.podToConfirm(pod)
		},
	}
}

// podToConfirm puts on the status queue the flag sets that a pod reads
// through a flagd flagplane asks (status.Confirmer): a pod that came,
// went, got its IP or turned Ready changes what they count.
func (c *Controller) podToConfirm(pod *corev1.Pod) {
	if c.confirmer == nil || !c.ready.Load() {
		return // the start-up pass computes every status
	}
	res := c.owners.WorkloadOf(context.Background(), pod.Namespace, pod)
	if !res.OK {
		return
	}
	v := c.topo.Snapshot()
	sources := v.SourcesOfWorkload(res.Workload)
	if res.Workload.Kind == topology.KindDeployment {
		if s, _, ok := v.FlagdSource(topology.Key{Kind: topology.KindFlagd, Namespace: pod.Namespace, Name: res.Workload.Name}); ok {
			sources = append(sources, s)
		}
	}
	for _, s := range sources {
		for _, ref := range v.FlagSetRefs(s) {
			c.confirmed.Add(ref.FlagSet)
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onPodChanged: a pod of a workload known only through its pods appeared or
// changed (its annotations and service account stand for the workload's).
func (c *Controller) onPodChanged(pod *corev1.Pod) {
	if !c.ready.Load() {
		// The initial pass reconciles every rollout.
	} else {
		c.enqueueRunningRolloutsIn(pod.Namespace)
	}
	if pod.DeletionTimestamp != nil {
		return
	}
	res := c.owners.WorkloadOf(context.Background(), pod.Namespace, pod)
	if !res.OK || !res.Workload.Kind.IsPodOwner() {
		return // a Deployment's, StatefulSet's or DaemonSet's: their informers tell
	}
	name := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	c.podOwners.mu.Lock()
	if c.podOwners.owner == nil {
		c.podOwners.owner, c.podOwners.pods = map[types.NamespacedName]topology.Key{}, map[topology.Key]int{}
	}
	if _, seen := c.podOwners.owner[name]; !seen {
		c.podOwners.owner[name] = res.Workload
		c.podOwners.pods[res.Workload]++
	}
	c.podOwners.mu.Unlock()
	w := topology.PodOwnerWorkload(res.Workload, pod.Annotations, pod.Spec.ServiceAccountName)
	c.event(string(w.Kind), "pod-changed")
	d, err := c.topo.UpsertWorkload(w)
	if err != nil {
		kind, ref := workflows.LogKey(w.Key())
		c.log.Error(err, "refused by the topology", kind, ref)
		return
	}
	c.dispatch(d)
}

// onPodDeleted: the workload leaves the graph with its last pod.
func (c *Controller) onPodDeleted(pod *corev1.Pod) {
	name := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	c.podOwners.mu.Lock()
	w, ok := c.podOwners.owner[name]
	last := false
	if ok {
		delete(c.podOwners.owner, name)
		c.podOwners.pods[w]--
		if last = c.podOwners.pods[w] == 0; last {
			delete(c.podOwners.pods, w)
		}
	}
	c.podOwners.mu.Unlock()
	if last {
		c.event(string(w.Kind), "deleted")
		c.dispatch(c.topo.DeleteWorkload(w))
	}
}
