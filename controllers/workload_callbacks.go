package controllers

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
)

func deploymentTemplate(d *appsv1.Deployment) *corev1.PodTemplateSpec   { return &d.Spec.Template }
func statefulSetTemplate(s *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &s.Spec.Template }
func daemonSetTemplate(d *appsv1.DaemonSet) *corev1.PodTemplateSpec     { return &d.Spec.Template }

// workloadHandler is the handler of one workload kind: all three kinds meet
// the graph as a topology.Workload.
func workloadHandler[T client.Object](c *Controller, kind topology.Kind, template func(T) *corev1.PodTemplateSpec) typedHandler[T] {
	from := func(obj T) topology.Workload { return topology.WorkloadFrom(kind, obj, template(obj)) }
	return typedHandler[T]{
		onAdd: func(obj T) { c.onWorkloadCreated(from(obj)) },
		onUpdate: func(old, new T) {
			o, n := from(old), from(new)
			switch {
			case old.GetUID() != new.GetUID():
				c.onWorkloadCreated(n)
			case !topology.WorkloadChanged(o, n):
				// Status, replicas, a rollout restart: the graph's rule.
			case !maps.Equal(o.Labels, n.Labels):
				c.onWorkloadLabelsChanged(n)
			case o.ServiceAccountName != n.ServiceAccountName:
				c.onWorkloadServiceAccountChanged(n)
			default:
				c.onWorkloadAnnotationsChanged(n)
			}
		},
		onDelete: func(obj T) { c.onWorkloadDeleted(from(obj)) },
	}
}

func (c *Controller) onWorkloadCreated(w topology.Workload) {
	c.event(string(w.Kind), "created")
	c.upsertWorkload(w)
}

// onWorkloadAnnotationsChanged: the workload opted in or out, or named other sources.
func (c *Controller) onWorkloadAnnotationsChanged(w topology.Workload) {
	c.event(string(w.Kind), "annotations-changed")
	c.upsertWorkload(w)
}

// onWorkloadLabelsChanged: source selectors may match differently.
func (c *Controller) onWorkloadLabelsChanged(w topology.Workload) {
	c.event(string(w.Kind), "labels-changed")
	c.upsertWorkload(w)
}

// onWorkloadServiceAccountChanged: kubernetes-provider RBAC binds another subject.
func (c *Controller) onWorkloadServiceAccountChanged(w topology.Workload) {
	c.event(string(w.Kind), "serviceaccount-changed")
	c.upsertWorkload(w)
}

func (c *Controller) upsertWorkload(w topology.Workload) {
	d, err := c.topo.UpsertWorkload(w)
	if err != nil {
		log.Log.Error(err, "refused by the topology", "workload", w.Key().String())
		return
	}
	c.dispatch(d)
}

func (c *Controller) onWorkloadDeleted(w topology.Workload) {
	c.event(string(w.Kind), "deleted")
	c.dispatch(c.topo.DeleteWorkload(w.Key()))
}
