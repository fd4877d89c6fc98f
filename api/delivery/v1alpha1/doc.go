// Package v1alpha1 holds flagplane's delivery.flagplane.dev/v1alpha1 API:
// the history of a flag set and the staged delivery of its edits.
//
//   - FeatureFlagRevision is one accepted spec of a FeatureFlag, immutable,
//     as a ControllerRevision is one pod template of a workload. flagplane
//     records one for every spec it accepts, owned by the FeatureFlag, and
//     keeps the newest of them (RevisionHistoryLimitAnnotation).
//   - FeatureFlagRolloutPolicy attaches to a FeatureFlag (spec.targetRef,
//     after Gateway API's GEP-713) and delivers each new revision to the
//     flag set's consumers in steps, while the others keep the previous
//     revision; health gates halt it and return every consumer to the
//     previous revision.
//
// # Consumers
//
// A consumer is one copy of the flag set that flagplane delivers: the
// generated ConfigMap of a namespace (every workload and Flagd of the
// namespace that mounts it reads that one file), and the sync server's
// streams to a namespace (its subscribers are authorised as the
// namespace). A step therefore selects namespaces: by their labels
// (namespaceSelector), by the labels of the workloads in them
// (workloadSelector: a namespace is selected when one of its consuming
// workloads matches, and status lists every workload the step carries), or
// a share of them (percentage, in a stable order of a hash of the
// namespace's name, so that adding a namespace moves few others).
//
// Workloads that read the FeatureFlag themselves (provider kubernetes) get
// an edit the moment it is stored: nothing stands between them and the API
// server. A policy whose flag set has such consumers is not accepted
// (Accepted False, reason UnstageableConsumers, listing them), and the flag
// set's edits then reach every consumer at once, as without a policy.
//
// +kubebuilder:object:generate=true
// +groupName=delivery.flagplane.dev
package v1alpha1
