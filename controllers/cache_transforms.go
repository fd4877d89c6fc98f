package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
)

// What the informer caches keep of an object. A cache holds every object of
// its kinds for the life of the process, and a cluster's workloads and their
// pod templates are most of it: at 10,000 Deployments the manager held about
// 15 KB for each, of which flagplane reads a few hundred bytes. The
// transforms below run once per object as the informer decodes it, before
// it is stored and before any handler sees it, so every reader (the graph's
// callbacks, the workflows, the webhooks) sees the same slim object.
//
// Objects flagplane generates (GeneratedMetadata.Owns) are kept whole: their
// reconcilers compare them field by field with what they want, and read who
// owns which of their fields (workflows.OwnsUndesiredFields).

// lastAppliedAnnotation is kubectl's client-side apply record: a copy of the
// whole object as last applied, which no reader of the cache uses.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// slimObjects is the default transform of the manager's cache: of an object
// flagplane did not generate it drops managedFields and kubectl's
// last-applied record. Neither is read from the cache: a status write goes
// to the status subresource, whose managedFields and metadata the API server
// takes from the stored object, and a workload's restart is a patch of its
// own (rollout.Restart).
//
// A FeatureFlag keeps who wrote it: its managedFields entries, each without
// its FieldsV1 (the set of fields, most of an entry's bytes). The revision
// history names the field manager of the newest write as the author of a
// spec (history.CreatedBy), from the manager, operation, time and
// subresource of each entry.
func slimObjects(gen workflows.GeneratedMetadata) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		m, err := meta.Accessor(obj)
		if err != nil || gen.Owns(m.GetLabels()) {
			return obj, nil //nolint:nilerr // not an object (a tombstone): left as it is
		}
		if _, ok := obj.(*v1beta1.FeatureFlag); ok {
			writers := m.GetManagedFields()
			slimMeta(m)
			m.SetManagedFields(withoutFieldSets(writers))
			return obj, nil
		}
		slimMeta(m)
		return obj, nil
	}
}

// withoutFieldSets are managedFields entries without their FieldsV1: who
// wrote, how and when, not which fields.
func withoutFieldSets(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(entries) == 0 {
		return nil
	}
	out := make([]metav1.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		e.FieldsV1 = nil
		out[i] = e
	}
	return out
}

// slimMeta drops managedFields and kubectl's last-applied record.
func slimMeta(m metav1.Object) {
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			delete(a, lastAppliedAnnotation)
			if len(a) == 0 {
				m.SetAnnotations(nil)
			}
		}
	}
}

// slimWorkloads is the transform of Deployments, StatefulSets and
// DaemonSets: of a workload flagplane did not generate, it keeps the
// metadata (less what slimObjects drops) and of the pod template what the
// graph, the rollouts and the healer read: its labels, its annotations (the
// openfeature.dev opt-in and references, kubectl's restartedAt) and its
// service account. Containers, volumes, the rest of the spec and the status
// are dropped. A Flagd's own Deployment is generated, and kept whole (its
// reconciler reads its spec, managedFields and readiness).
//
// topology.WorkloadFrom of the slim object equals that of the whole one:
// TestSlimWorkloadKeepsWhatTheGraphReads checks it over random objects.
func slimWorkloads(gen workflows.GeneratedMetadata) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		m, err := meta.Accessor(obj)
		if err != nil || gen.Owns(m.GetLabels()) {
			return obj, nil //nolint:nilerr // not an object (a tombstone): left as it is
		}
		switch w := obj.(type) {
		case *appsv1.Deployment:
			slim := &appsv1.Deployment{TypeMeta: w.TypeMeta, ObjectMeta: w.ObjectMeta}
			slim.Spec.Template = slimTemplate(&w.Spec.Template)
			obj, m = slim, slim
		case *appsv1.StatefulSet:
			slim := &appsv1.StatefulSet{TypeMeta: w.TypeMeta, ObjectMeta: w.ObjectMeta}
			slim.Spec.Template = slimTemplate(&w.Spec.Template)
			obj, m = slim, slim
		case *appsv1.DaemonSet:
			slim := &appsv1.DaemonSet{TypeMeta: w.TypeMeta, ObjectMeta: w.ObjectMeta}
			slim.Spec.Template = slimTemplate(&w.Spec.Template)
			obj, m = slim, slim
		}
		slimMeta(m)
		return obj, nil
	}
}

// slimTemplate is what a slim workload keeps of its pod template.
func slimTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	out := corev1.PodTemplateSpec{}
	out.Labels = t.Labels
	out.Annotations = t.Annotations
	out.Spec.ServiceAccountName = t.Spec.ServiceAccountName
	out.Spec.DeprecatedServiceAccount = t.Spec.DeprecatedServiceAccount
	return out
}
