package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	c.configMapChanged(cm)
}

// onConfigMapEdited: repair drift, and update the status of its flag set
// and its sources.
func (c *Controller) onConfigMapEdited(cm *corev1.ConfigMap) {
	c.event("ConfigMap", "edited")
	c.configMapChanged(cm)
}

// onConfigMapDeleted: restore it if a workload still needs it.
func (c *Controller) onConfigMapDeleted(cm *corev1.ConfigMap) {
	c.event("ConfigMap", "deleted")
	c.configMapChanged(cm)
}

func (c *Controller) configMapChanged(cm *corev1.ConfigMap) {
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
		for _, s := range v.SourcesOfFlagSet(key.FlagSet()) {
			c.enqueue(s)
		}
		// A Flagd's Deployment waits for its ConfigMaps.
		for _, w := range v.WorkloadsOfConfigMap(key) {
			if w.Kind == topology.KindFlagd {
				c.enqueue(w)
			}
		}
	}
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
