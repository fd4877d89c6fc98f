// Package workflows computes what the cluster should hold for a part of the
// topology, and applies it. Its sub-packages, one per concern, read as the
// data path of an edit:
//
//   - flagsets: whether a flag set can be served (validation), and its
//     flagd document (Render);
//   - configmaps: the generated ConfigMaps that hold flag sets for the
//     file provider;
//   - rbac: the Roles and RoleBindings of the kubernetes provider;
//   - injection: what a pod gets (sidecar, volumes, env, setting
//     conflicts, the rollout fingerprint), applied by the Pod webhook;
//   - rollout: the pods of a workload and the workload of a pod, the
//     webhook's pod annotations, and restarting a workload;
//   - status: the status of FeatureFlags, sources and in-process
//     configurations, and the annotation warnings of workloads;
//   - flagds: the Flagd kind's Deployment, Service, Ingress, HTTPRoute and
//     status;
//   - history: every accepted FeatureFlag spec kept as a
//     FeatureFlagRevision, numbered, attributed and pruned;
//   - blast: what a change would reach, before it is made (the webhooks'
//     warnings, `flagplane diff`);
//   - manifests: the graph built offline, from YAML, for the CLI and the
//     golden tests.
//
// Each has a pure function from a topology.View (and, where the outcome of
// earlier writes matters, a reader of the cache) to the desired objects —
// configmaps.Desired, rbac.Desired, status.DesiredSource, flagds.Desired,
// injection.Desired — tested with golden files, and a thin apply step that
// compares with the cache and writes only what differs. Its doc.go says
// what it computes and what it applies.
//
// This package holds only what they share, and imports none of them but
// flagsets and injection (the parts of Settings): the operator-wide
// Settings; the metadata of generated objects (GeneratedMetadata: the
// managed-by value and which objects it Owns, --labels, --annotations); the
// rules of writing them (CreateOwned never takes over an object flagplane
// did not make, WriteFailures remembers failed writes for status, and
// UnrecordedRevisions the specs the history did not record,
// FieldsMismatch and OwnsUndesiredFields tell whether a server-side apply
// would change anything, RequeueAfter asks to run again later); Event reasons and
// actions (Warn, Normal, WorkloadEventTarget); and condition helpers
// (TurnedFalse, WaitingFor). The imports run one way: flagsets and
// injection import nothing of the workflows; configmaps, rbac and rollout
// import this package; status imports configmaps and rbac; flagds imports
// rbac. TestLayers keeps it so.
//
// The operator-wide inputs (the flag-set validator of package flagsets, the
// metadata of generated objects, the injection.Options the webhook injects
// with) are a Settings value made once at start: the reconcilers hold it and
// the pure functions take it, or the part of it they need, as an argument.
// No workflow package keeps process-wide mutable state.
//
// Workflows never decide which objects to recompute: the controllers hand
// them the keys of a topology.Delta.
//
// The golden test of this package (golden_test.go, an external test) builds
// the graph from testdata/golden/<case>.in.yaml and compares everything the
// workflows derive — ConfigMaps, RBAC, rollout triggers, annotation
// warnings, status — with <case>.out.yaml (go test ./workflows -run
// TestGolden -update rewrites them; a changed golden file needs its reason
// in the commit).
package workflows
