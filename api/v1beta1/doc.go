// Package v1beta1 holds the core.openfeature.dev/v1beta1 API served by
// flagplane: FeatureFlag (a flag set in flagd's format), FeatureFlagSource (how
// flags reach workloads, and which workloads) and InProcessConfiguration (env
// vars for in-process SDKs).
//
// The schema is a superset of the OpenFeature Operator's v1beta1: every field,
// JSON name, default and enum of that API is kept, so existing manifests apply
// unchanged. flagplane adds workload targeting (targetRefs, selector) and
// status on every kind.
//
// +kubebuilder:object:generate=true
// +groupName=core.openfeature.dev
package v1beta1
