package restarts

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// Annotations flagplane's Pod webhook sets on the pods it injects into. They
// record an admission outcome, not a relationship: the graph never reads
// them. The workflows compare them with what a pod would get now.
const (
	// AnnotationInjection is the fingerprint of what the pod got
	// (injection.Injection.Fingerprint). A pod that has it is never mutated again; a
	// pod of a targeted workload without it was admitted before its
	// workload was targeted or while the webhook was unreachable, and the
	// healer rolls its workload; a pod with another fingerprint than its
	// workload's now is rolled when rolloutOnChange asks for it.
	AnnotationInjection = "flagplane.core.openfeature.dev/injection"
	// AnnotationIncomplete says what the pod did not get because a
	// ConfigMap could not be made to exist; the healer rolls the workload
	// once the ConfigMaps exist.
	AnnotationIncomplete = "flagplane.core.openfeature.dev/injection-incomplete"
	// AnnotationUnresolved lists the references of the pod's openfeature.dev
	// annotations that did not resolve when it was admitted (a source or
	// in-process configuration that did not exist yet, or that no
	// ReferenceGrant permitted), as "<Kind> <namespace>/<name>",
	// comma-separated. The pod got the rest; the healer rolls the workload
	// once what its pods would get differs from what this one got.
	AnnotationUnresolved = "flagplane.core.openfeature.dev/injection-unresolved"
	// AnnotationAdmitted is on every pod of a workload that the Pod
	// webhook admitted with nothing to inject (as far as the replica that
	// admitted it knew, no source or in-process configuration applied to
	// its workload then), with the value AdmittedNothingToInject. It is the
	// pod's own record that the webhook saw it: a pod of a targeted
	// workload without it and without AnnotationInjection never reached
	// the webhook (it fails open), and one with it was admitted before
	// flagplane knew its workload to be targeted. Only the webhook sets it;
	// it never keeps the webhook from looking at a pod.
	AnnotationAdmitted = "flagplane.core.openfeature.dev/admitted"
	// AnnotationRefused says why the pod did not get its flagd sidecar:
	// it would have passed a limit of what a pod carries (an argument or
	// environment string longer than Linux takes, a pod larger than the
	// API server stores), in one line (injection.Refusal). The pod got the
	// rest (the env vars of in-process configurations). It records as its
	// AnnotationInjection its workload's injection as it stood (none, with
	// AnnotationAdmitted, when that was all refused), so that the healer
	// rolls the workload once that changes, and not before.
	AnnotationRefused = "flagplane.core.openfeature.dev/injection-refused"
	// AnnotationRolloutOnChange is "true" on a pod one of whose sources
	// asked for rolloutOnChange when it was admitted, so that removing that
	// source rolls the pod too.
	AnnotationRolloutOnChange = "flagplane.core.openfeature.dev/rollout-on-change"
)

// AdmittedNothingToInject is AnnotationAdmitted's value.
const AdmittedNothingToInject = "nothing-to-inject"

// ControllerIndex is the cache field index of pod and ReplicaSet metadata by
// their controller, "<Kind>/<name>": how a workload's pods are found without
// listing a namespace's pods.
const ControllerIndex = "flagplane.controller"

var replicaSetGVK = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// IndexPodsByController registers ControllerIndex on the metadata caches of
// pods and ReplicaSets. Call it before the manager starts.
func IndexPodsByController(ctx context.Context, indexer client.FieldIndexer) error {
	byController := func(obj client.Object) []string {
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			return []string{ref.Kind + "/" + ref.Name}
		}
		return nil
	}
	// Pods are cached typed but slim (controllers.CacheOptions); ReplicaSets as metadata.
	if err := indexer.IndexField(ctx, &corev1.Pod{}, ControllerIndex, byController); err != nil {
		return fmt.Errorf("indexing pods by controller: %w", err)
	}
	rs := &metav1.PartialObjectMetadata{}
	rs.SetGroupVersionKind(replicaSetGVK)
	if err := indexer.IndexField(ctx, rs, ControllerIndex, byController); err != nil {
		return fmt.Errorf("indexing ReplicaSet metadata by controller: %w", err)
	}
	return nil
}

// WorkloadPods reads workloads and the metadata of their pods from the
// manager's cache (with IndexPodsByController).
type WorkloadPods struct {
	Reader client.Reader
}

// CurrentPods returns a workload and the pods that run its current pod
// template as far as flagplane's annotations go: not terminating, and
// created after its last restart (older ones are being replaced). obj is
// nil when the workload is gone.
//
// Both times have a resolution of one second, so a pod created in the
// second of the restart counts as current: a change that comes within a
// second of a rollout would otherwise see no current pod and be lost. At
// worst a pod of the old template created in that second is restarted
// once more.
func (p WorkloadPods) CurrentPods(ctx context.Context, w topology.Key) (obj client.Object, pods []corev1.Pod, err error) {
	obj, tmpl, err := p.workload(ctx, w)
	if err != nil || obj == nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	// Restart writes fractions of a second; creation times have none.
	restartedAt, _ := time.Parse(time.RFC3339, tmpl.Annotations[RestartedAtAnnotation])
	restartedAt = restartedAt.Truncate(time.Second)
	all, err := p.podsOf(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	for _, pod := range all {
		if pod.DeletionTimestamp == nil && !pod.CreationTimestamp.Time.Before(restartedAt) {
			pods = append(pods, pod)
		}
	}
	return obj, pods, nil
}

// workload reads the workload and its pod template.
func (p WorkloadPods) workload(ctx context.Context, w topology.Key) (client.Object, *corev1.PodTemplateSpec, error) {
	key := client.ObjectKey{Namespace: w.Namespace, Name: w.Name}
	switch w.Kind {
	case topology.KindDeployment:
		deployment := &appsv1.Deployment{}
		return deployment, &deployment.Spec.Template, p.Reader.Get(ctx, key, deployment)
	case topology.KindStatefulSet:
		statefulSet := &appsv1.StatefulSet{}
		return statefulSet, &statefulSet.Spec.Template, p.Reader.Get(ctx, key, statefulSet)
	case topology.KindDaemonSet:
		daemonSet := &appsv1.DaemonSet{}
		return daemonSet, &daemonSet.Spec.Template, p.Reader.Get(ctx, key, daemonSet)
	}
	return nil, nil, nil
}

// podsOf lists a workload's pods' metadata: a Deployment's through its ReplicaSets.
func (p WorkloadPods) podsOf(ctx context.Context, w topology.Key) ([]corev1.Pod, error) {
	owners := []string{string(w.Kind) + "/" + w.Name}
	if w.Kind == topology.KindDeployment {
		var rss metav1.PartialObjectMetadataList
		rss.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSetList"))
		if err := p.Reader.List(ctx, &rss, client.InNamespace(w.Namespace), client.MatchingFields{ControllerIndex: owners[0]}); err != nil {
			return nil, fmt.Errorf("listing the ReplicaSets of %s: %w", w, err)
		}
		owners = owners[:0]
		for _, rs := range rss.Items {
			owners = append(owners, "ReplicaSet/"+rs.Name)
		}
	}
	var out []corev1.Pod
	for _, owner := range owners {
		var pods corev1.PodList
		if err := p.Reader.List(ctx, &pods, client.InNamespace(w.Namespace), client.MatchingFields{ControllerIndex: owner}); err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", w, err)
		}
		out = append(out, pods.Items...)
	}
	return out, nil
}

// SlimPod keeps of a pod what flagplane reads (its metadata but managed
// fields, and its service account), so that caching every pod of the
// cluster costs about what caching their metadata would. It is the cache
// transform of pods (controllers.CacheOptions).
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	slim.ManagedFields = nil
	slim.Spec.ServiceAccountName = pod.Spec.ServiceAccountName
	// The health gates of staged rollouts read whether a pod is Ready, when
	// its containers last restarted, and where its flagd sidecar serves
	// its metrics (staging.PodOf).
	slim.Status.PodIP = pod.Status.PodIP
	// Only the injected sidecar (a native sidecar: an init container that
	// always restarts) is read, and not on the host's network.
	slim.Spec.HostNetwork = pod.Spec.HostNetwork
	for _, c := range pod.Spec.InitContainers {
		if c.Name == injection.SidecarName {
			slim.Spec.InitContainers = append(slim.Spec.InitContainers, corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			slim.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		kept := corev1.ContainerStatus{Name: cs.Name, RestartCount: cs.RestartCount, Ready: cs.Ready}
		if t := cs.LastTerminationState.Terminated; t != nil {
			kept.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: t.FinishedAt, ExitCode: t.ExitCode}
		}
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, kept)
	}
	return slim, nil
}
