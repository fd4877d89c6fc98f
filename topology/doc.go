// Package topology is flagplane's in-memory graph of flag sources, flag sets,
// workloads and the ConfigMaps generated for them.
//
// Edges run parent → child:
//
//	Source ──refs──▶ FlagSet ──renders──▶ ConfigMap ──mounted by──▶ Workload
//	   └──────────────────────targets──────────────────────────────▶ Workload
//	InProcessConfig ──targets──▶ Workload
//
// Every edit (Upsert*/Delete*) returns a Delta: the nodes whose desired state
// may have changed. Callers recompute only those. The central invariant is
// that the graph built incrementally from any sequence of events equals the
// graph built from scratch over the final set of objects.
//
// The package is pure: no client-go, no controller-runtime. It is safe for
// concurrent use; Snapshot returns a read-only View that stays consistent
// while writers go on.
package topology
