// Package v1alpha1 holds flagplane's own policy.flagplane.dev/v1alpha1 API:
// FeatureFlagSourcePolicy, namespace-wide defaults and overrides for the
// sidecar settings of FeatureFlagSources, after Gateway API's policy
// attachment (GEP-713).
//
// The kind is flagplane's, not the OpenFeature Operator's, so it lives in
// its own group: core.openfeature.dev stays exactly the OpenFeature
// Operator's API.
//
// # How a policy applies
//
// A FeatureFlagSourcePolicy targets the Namespace it lives in (spec.targetRef,
// kind Namespace, the namespace's name). It governs the flagd sidecar of
// every workload of that namespace and the flagd of every Flagd there,
// whatever namespace their FeatureFlagSources are in:
//
//   - spec.defaults apply to a setting that none of the workload's sources
//     sets;
//   - spec.overrides replace what the sources set, and the sources cannot
//     change them.
//
// Each block has a strategy, with the meaning Kuadrant gives it:
//
//   - merge (the default): setting by setting, and for envVars,
//     contextValues and headerToContextMappings entry by entry;
//   - atomic: the block is one unit. Atomic defaults apply only where the
//     sources set none of the settings the block names; atomic overrides
//     replace each setting the block names whole (a map or list of the
//     sources' is dropped, not merged).
//
// Several policies in one namespace are merged with the oldest winning (by
// creation time, then name), as Gateway API resolves conflicting policies.
//
// RBAC is what makes overrides binding: an application team that may write
// FeatureFlagSources but not FeatureFlagSourcePolicies cannot change them.
//
// # Status
//
//   - Accepted: the policy targets its own Namespace. False (Invalid)
//     otherwise; it then applies to nothing.
//   - Enforced: on how many of the namespace's sidecars its settings are
//     in force, and what of it did not apply (an atomic block a source
//     pre-empted, a setting another policy wins). False: Invalid (not
//     accepted), NoSidecars (no workload or Flagd of the namespace has a
//     sidecar), Overridden (none of its settings is in force anywhere).
//   - Ready, Reconciling, Stalled: as on core.openfeature.dev's kinds. Ready
//     follows Accepted, Stalled when it is not; Enforced is left out (a
//     policy of a namespace with no sidecar yet, or whose defaults every
//     source pre-empts, does what it asks).
//
// +kubebuilder:object:generate=true
// +groupName=policy.flagplane.dev
package v1alpha1
