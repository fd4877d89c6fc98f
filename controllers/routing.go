package controllers

import (
	"errors"
	"fmt"

	"github.com/flagplane/flagplane/topology"
)

// One queue per kind, so one writer per status. Every node of the graph is
// reconciled by exactly one workflow queue, chosen by its kind here, and
// every caller puts a node's key on the queue through enqueue. A status is
// written by the workflow that reconciles its object, so a kind reconciled
// on two queues has two writers of its status: both read the same cached
// object, the second write is refused with a Conflict and logged as a
// "Reconciler error" before its retry (a Flagd's RBAC events once put the
// Flagd on the workloads queue while its own events put it on the flagds
// queue).
//
//	FeatureFlag, FeatureFlagSource, InProcessConfiguration,
//	FeatureFlagSourcePolicy                        → statuses (status.Updater)
//	Flagd (its objects, its RBAC and its status)   → flagds (flagds.Reconciler)
//	Deployment, StatefulSet, DaemonSet, pod owners → workloads (RBAC, rollouts;
//	                                                 no status of flagplane's)
//
// ConfigMaps are keyed by object, not by node, and have a queue of their own.

// queueOf is the one queue that reconciles keys of k's kind (the table of
// kinds; pod owners of other kinds on the workloads queue), or nil for
// a kind that no queue reconciles (a ConfigMap node, a ReferenceGrant).
func (c *Controller) queueOf(k topology.Key) *workQueue[topology.Key] {
	if q, ok := c.queues[k.Kind]; ok {
		return q
	}
	if k.Kind.IsPodOwner() {
		return c.workloads
	}
	return nil
}

// route fills queueOf's table, and the status writers of the kinds on the
// statuses queue, from the kinds' lines. A line on the statuses queue
// without a status writer, or with one on another queue, is refused.
func (c *Controller) route(kinds []registrar) error {
	c.queues = map[topology.Kind]*workQueue[topology.Key]{}
	c.statusOf = map[topology.Kind]statusWriter{}
	c.statusKinds = nil
	for _, k := range kinds {
		r := k.routes()
		switch {
		case r.queue == c.statuses && r.status == nil:
			return fmt.Errorf("the kinds table: %s is on the statuses queue and has no status writer", r.kind)
		case r.queue != c.statuses && r.status != nil:
			return fmt.Errorf("the kinds table: %s has a status writer and is not on the statuses queue", r.kind)
		case r.status != nil:
			c.statusOf[r.kind] = r.status
			c.statusKinds = append(c.statusKinds, r.kind)
		}
		if r.queue != nil {
			c.queues[r.kind] = r.queue
		}
	}
	return nil
}

// statusKeys are the objects of every kind with a status writer, in the
// order of the table: what the start-up pass writes the status of.
func (c *Controller) statusKeys(v *topology.View) []topology.Key {
	var keys []topology.Key
	for _, kind := range c.statusKinds {
		keys = append(keys, v.OfKind(kind)...)
	}
	return keys
}

// enqueue puts k on the queue of its kind (queueOf).
func (c *Controller) enqueue(k topology.Key) {
	if q := c.queueOf(k); q != nil {
		q.Add(k)
	}
}

// errNotThisQueue: a key reached a queue that does not reconcile its kind.
var errNotThisQueue = errors.New("its kind is reconciled on another queue")
