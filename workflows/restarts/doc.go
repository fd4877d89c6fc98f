// Package restarts relates workloads and their pods, and rolls a workload
// whose pods no longer have what they would get now.
//
// What it reads: the Owners of a pod (the workload at the top of its
// controller chain, from the metadata caches: Owners.WorkloadOf), the
// current pods of a workload (WorkloadPods.CurrentPods: not terminating,
// created after its last restart), and the annotations the Pod webhook
// sets on the pods it admits (AnnotationInjection, the injection's
// fingerprint; AnnotationIncomplete, AnnotationUnresolved,
// AnnotationRolloutOnChange). It computes nothing from the graph itself:
// the fingerprint a pod would get now is injection.Fingerprint's.
//
// What it applies: Restart, the one patch that rolls a workload's pods
// (the pod template's RestartedAtAnnotation, as `kubectl rollout restart`
// sets it), used by the Reconciler when a source asks for rolloutOnChange
// and by the webhook's healer for pods admitted without their injection.
// SlimPod and IndexPodsByController set up the cache it reads.
package restarts
