// Package injection computes what flagplane adds to a pod of a workload:
// the flagd sidecar, the volumes it mounts and the env vars of the app
// containers, from the graph alone.
//
// What it computes, from a topology.View and the operator-wide Options (the
// manager's --sidecar-* and --in-process-* flags, the sync server), reading
// no cluster state:
//
//   - Desired: the Injection of a workload — the sidecar container, its
//     ConfigMap volumes, the app env vars, image pull secrets, pod
//     annotations, the generated ConfigMaps the pod needs, what was merged,
//     the settings one source overrode of another (SettingConflict) and
//     warnings for what was left out;
//   - ConflictsOfSource: the settings of one source that others override,
//     for the status of that source;
//   - Fingerprint: a hash of what a pod would get now and whether a source
//     asks for a rollout on change, which the rollout compares with the
//     fingerprint its pods were admitted with;
//   - ContainerOfSource: the same container for one source alone, which a
//     Flagd's Deployment runs;
//   - the limits of what a pod carries (limits.go): a sidecar whose
//     argument or environment string Linux's execve would refuse is left
//     out, and DesiredWithRefusal says why (Refusal); PodRefusal tells an
//     injection that would make a pod larger than the API server stores;
//     EntryOfSource and SourcesArgBytes measure a source's --sources
//     entries from its spec alone, for its admission.
//
// What it applies: Injection.ApplyTo patches a pod spec in memory, and
// Injection.Without drops ConfigMaps that cannot be mounted. Nothing here
// talks to the API server: the admission webhook (package webhooks) applies
// the patch to the pods it admits, sets the pod annotations, makes the
// ConfigMaps exist and records the fingerprint; package status reports
// conflicts in source status and package restarts restarts workloads on a
// changed fingerprint.
//
// What a pod gets:
//
//   - flagd as a native sidecar: an init container with restartPolicy
//     Always, appended after the pod's own init containers, so that they run
//     first and flagd is up before the app containers start (a startup probe
//     on /healthz holds them back until it serves);
//   - for every file source, the generated ConfigMap as a volume, mounted
//     read-only at /etc/flagd/<ns>_<name>/ in the sidecar; the file URI is
//     /etc/flagd/<ns>_<name>/<ns>_<name>.flagd.json, as in the OpenFeature
//     Operator;
//   - the prefixed env vars that point the app containers' flagd providers at
//     the sidecar (FLAGD_PORT, FLAGD_RESOLVER=rpc, ...) or, for in-process
//     configurations, at their sync source (FLAGD_RESOLVER=in-process, ...).
//
// What flagd is told depends on its release (SidecarOptions.Tag, see
// package flagdversion): a flag (--context-value, --context-from-header,
// --sync-provider-args), a --sources provider or field (headers, which
// carries the sync server's credential of a flagd-proxy entry) that the
// injected release does not take is left out, with a warning and a
// VersionGap, which the source's status reports (VersionGapsOfSource). An
// image tag flagplane does not vouch for is written for as flagd v0.16.0.
//
// Several sources on one workload are merged in the order
// topology.View.SourcesOfWorkload gives (annotation order, then targeting
// sources by key). A later source's setting overrides an earlier one's, as
// in the OpenFeature Operator, but a setting counts only where a source sets
// it to something else than the API's default, so that a source that leaves
// the port alone never overrides one that sets it (in the OpenFeature
// Operator the CRD's defaults make the last source win) nor the operator's
// default (SidecarOptions). Every overridden setting is a SettingConflict.
// Lists (sources, CORS origins, sync provider args) are concatenated without
// repeats; maps (env vars, context values, header mappings, resources) merge
// by key. In-process configurations merge by the OpenFeature Operator's rule
// (see inProcessMerge).
//
// The golden files under testdata hold, for each case, the pod spec every
// workload's pods get (go test ./workflows/injection -run
// TestInjectionGolden -update rewrites them).
package injection
