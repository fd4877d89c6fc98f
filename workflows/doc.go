// Package workflows computes what the cluster should hold for a part of the
// topology, and applies it.
//
// Each output has a pure function from a topology.View (and, where the
// outcome of earlier writes matters, an Observed reader of the cache) to the
// desired objects — DesiredConfigMap, DesiredSourceStatus, DesiredRBAC,
// InjectionFingerprint — tested with golden files, and a thin apply step that
// compares with the cache and writes only what differs.
//
// Workflows never decide which objects to recompute: the controllers hand
// them the keys of a topology.Delta.
package workflows
