// Package topology is flagplane's in-memory graph of flag sources, flag sets,
// workloads and the ConfigMaps generated for them.
//
// Edges run parent → child:
//
//	Source ──refs──▶ FlagSet ──renders──▶ ConfigMap ──mounted by──▶ Workload
//	   ├──────────────────────targets──────────────────────────────▶ Workload
//	   └──────────────────────serves───────────────────────────────▶ Flagd
//	InProcessConfig ──targets──▶ Workload
//	SourcePolicy (no edge: it governs the sidecars of its namespace; policy.go)
//
// Every edit (Upsert*/Delete*) returns a Delta: the nodes whose desired state
// may have changed. Callers recompute only those. The central invariant is
// that the graph built incrementally from any sequence of events equals the
// graph built from scratch over the final set of objects.
//
// The package is pure: no client-go, no controller-runtime. It is safe for
// concurrent use; Snapshot returns a read-only View that stays consistent
// while writers go on.
//
// # What makes an edge
//
//   - refs: a spec.sources entry whose provider in force (its own, else the
//     source's defaultSyncProvider, else file) reads a FeatureFlag (file,
//     kubernetes, flagd-proxy) and whose reference is Resolved. A reference
//     to another namespace needs a grant there (see tenancy.go; as with
//     Gateway API's ReferenceGrant, it is NotPermitted until then, whether
//     or not the flag set exists); a permitted reference to a flag set that
//     does not exist is NotFound. Unresolved references are kept (see
//     View.UnresolvedRefs) and resolve when what they wait for appears.
//   - targets: a source targets a workload of its own namespace named in
//     spec.targetRefs or matching spec.selector, and any workload whose pod
//     template has openfeature.dev/enabled "true" and names it in
//     openfeature.dev/featureflagsource (a name alone is in the workload's
//     namespace) — across namespaces only when a grant in the source's
//     namespace permits the workload's pods. In-process configurations are
//     named the same way in openfeature.dev/inprocessconfiguration, under the
//     same rule. Annotation references that do not resolve have no edge;
//     View.AnnotationRefs and View.DeniedReferrers tell them.
//   - renders and mounted by: a workload mounts one ConfigMap per flag set
//     that one of its sources resolves with the file provider; the
//     ConfigMap is in the workload's namespace (ConfigMapName names it) and
//     exists while some workload mounts it. A Flagd mounts them as a
//     workload does, from the source it runs.
//   - serves: a Flagd's spec.featureFlagSource names the source, and the
//     reference resolves (across namespaces, with a grant for kind Flagd;
//     see flagd.go).
//
// # Deltas
//
// A Delta names what an event changed for its readers: a flag set's status
// (its resolved sources and consumer namespaces), served content or reader
// namespaces (View.ReaderNamespaces, which the sync server's entitlement
// reads); a source's or in-process configuration's status (its refs,
// targets and denied referrers) or settings; a workload's injection (its
// sources in order, their settings and resolved flag sets and, for the
// kubernetes provider, whether it may read them, its in-process
// configurations, ConfigMaps and, when it has a sidecar, its service
// account) and its annotation references that do not resolve; a Flagd's
// generated objects and status (see flagd.go); a ConfigMap's existence or
// content; a FeatureFlagSourcePolicy's status (its spec, the other
// policies of its namespace, and the desired state of every workload and
// Flagd there; see policy.go), a policy's spec reaching the workloads and
// Flagds of its namespace that a source serves. Events that change none of these, such
// as status, resourceVersion or unrelated labels, give an empty Delta. A
// property test checks that every Delta is exact against these definitions.
//
// # Tenancy
//
// Every hop that crosses a namespace is decided by one rule, in tenancy.go:
// it resolves only when a grant (a Gateway API ReferenceGrant) in the
// namespace referred to permits the referring kind from the referring
// namespace. Consumers read the outcome from the graph and never decide it
// again.
//
// # Objects
//
// Upsert keeps the objects it is given, without copying them, and Views
// return them: treat them as read-only, as objects of an informer's cache
// are.
package topology
