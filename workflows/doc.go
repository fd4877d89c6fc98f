// Package workflows computes what the cluster should hold for a part of the
// topology, and applies it.
//
// Each output has a pure function from a topology.View (and, where the
// outcome of earlier writes matters, an Observed reader of the cache) to the
// desired objects — DesiredConfigMap, DesiredSourceStatus, DesiredRBAC,
// DesiredFlagd — tested with golden files, and a thin apply step that
// compares with the cache and writes only what differs.
//
// Two concerns live in sub-packages that this one imports and that never
// import it: flagsets (flag-set validation) and injection (what a pod gets:
// sidecar, volumes, env, setting conflicts, the rollout fingerprint).
//
// The operator-wide inputs (the flag-set validator of package flagsets, the
// metadata of generated objects, the injection.Options the webhook injects
// with) are a Settings value made once at start: the reconcilers hold it and
// the pure functions take it, or the part of it they need, as an argument.
// The package keeps no process-wide mutable state.
//
// Workflows never decide which objects to recompute: the controllers hand
// them the keys of a topology.Delta.
package workflows
