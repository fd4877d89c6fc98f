package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// Callbacks of the objects flagplane generates. Their desired state is the
// graph's; an event on them only says the cluster may have drifted.

func (c *Controller) configMapHandler() typedHandler[*corev1.ConfigMap] {
	return typedHandler[*corev1.ConfigMap]{
		onAdd: func(cm *corev1.ConfigMap) {
			c.configMapSeen(cm)
			c.onConfigMapCreated(cm)
		},
		onUpdate: func(old, new *corev1.ConfigMap) {
			// Any new version ends the wait for a write of flagplane's,
			// even one that changed nothing compared below.
			c.configMapSeen(new)
			if !equality.Semantic.DeepEqual(old.Data, new.Data) || !equality.Semantic.DeepEqual(old.BinaryData, new.BinaryData) ||
				!equality.Semantic.DeepEqual(old.Labels, new.Labels) || !equality.Semantic.DeepEqual(old.OwnerReferences, new.OwnerReferences) {
				c.onConfigMapEdited(new)
			}
		},
		onDelete: func(cm *corev1.ConfigMap) {
			c.configMapSeen(cm)
			c.onConfigMapDeleted(cm)
		},
	}
}

// configMapSeen: the cache holds a new version of a generated ConfigMap
// (or none), which may be what a flag set's status waits for.
func (c *Controller) configMapSeen(cm *corev1.ConfigMap) {
	c.deliveries.seen(client.ObjectKeyFromObject(cm), cm.ResourceVersion)
}

// onConfigMapCreated: a source waiting for it may now be Programmed; an
// unwanted one (left by an earlier run) is removed.
func (c *Controller) onConfigMapCreated(cm *corev1.ConfigMap) {
	c.event("ConfigMap", "created")
	c.configMapChanged(cm, false)
}

// onConfigMapEdited: repair drift, and update the status of its flag set
// and its sources.
func (c *Controller) onConfigMapEdited(cm *corev1.ConfigMap) {
	c.event("ConfigMap", "edited")
	c.configMapChanged(cm, false)
}

// onConfigMapDeleted: restore it if a workload still needs it.
func (c *Controller) onConfigMapDeleted(cm *corev1.ConfigMap) {
	c.event("ConfigMap", "deleted")
	c.configMapChanged(cm, true)
}

func (c *Controller) configMapChanged(cm *corev1.ConfigMap, gone bool) {
	if !c.ready.Load() {
		// The startup pass visits every generated ConfigMap.
		return
	}
	c.configMaps.Add(client.ObjectKeyFromObject(cm))
	v := c.topo.Snapshot()
	if key, ok := v.ConfigMapByName(cm.Namespace, cm.Name); ok {
		if took, ok := c.edits.delivered(v, key.FlagSet(), cm); ok && c.opts.Metrics != nil {
			c.opts.Metrics.EditDelivered("configmap", took)
		}
		// The flag set's status counts the ConfigMaps that hold its revision.
		c.enqueue(key.FlagSet())
		// A source's status says whether its ConfigMaps are in place. One
		// that holds its flag set's current content, the common end of an
		// edit, changes nothing in a source that reports Programmed: its
		// status, which visits every target, is not computed again.
		// Unless it is on the queue or being reconciled: that
		// reconciliation may have read the cache before this ConfigMap
		// was in it, and only running again puts it right.
		current := !gone && holdsCurrent(v, key, cm)
		for _, s := range v.SourcesOfFlagSet(key.FlagSet()) {
			if current && !c.statuses.pending.has(s) && c.statusWF.ReportsProgrammed(context.Background(), s) {
				continue
			}
			c.enqueue(s)
		}
		// A Flagd's Deployment waits for its ConfigMaps.
		for _, f := range v.FlagdsOfConfigMap(key) {
			c.enqueue(f)
		}
	}
}

// holdsCurrent tells whether cm holds what the ConfigMap key of the graph
// should: its flag set's rendering planned for its namespace (the current
// one unless a rollout holds the namespace at another), one a ConfigMap can carry (as
// the status of its sources judges it: status.configMapPending).
func holdsCurrent(v *topology.View, key topology.Key, cm *corev1.ConfigMap) bool {
	served, ok := v.ServedFor(key.FlagSet(), key.Namespace)
	r := served.Rendered
	if !ok || served.Held || !r.Valid() || r.Content == "" {
		return false
	}
	if _, over := r.Overflow(string(v1beta1.SyncProviderFile)); over {
		return false
	}
	held, ok := cm.Data[topology.ConfigMapDataKey(key.FlagSet())]
	return ok && len(cm.Data) == 1 && held == r.Content
}

// rbacHandler: a generated Role or RoleBinding changed or went away; its
// workload's RBAC is reconciled again.
func rbacHandler[T client.Object](c *Controller) typedHandler[T] {
	changed := func(obj T) {
		if !c.ready.Load() {
			return
		}
		if w, ok := rbac.WorkloadOfName(obj.GetName()); ok {
			// A workload's or a Flagd's: each on the queue of its kind.
			c.enqueue(w)
			// What the cluster holds of its RBAC decides whether its sources are Programmed.
			for _, s := range c.topo.Snapshot().SourcesOfWorkload(w) {
				c.enqueue(s)
			}
		}
	}
	return typedHandler[T]{
		onAdd:    changed,
		onUpdate: func(_, new T) { changed(new) },
		onDelete: changed,
	}
}
