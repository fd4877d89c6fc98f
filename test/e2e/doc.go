// Package e2e runs every way flagplane delivers flags end to end, with
// nothing standing in for what Kubernetes and flagd do: a real control
// plane with kube-scheduler (test/controlplane), the whole operator with
// its admission webhooks and its flagd sync server (test/operator), and
// the test node (test/node), which runs the pods the ReplicaSet controller
// creates and admission mutates — the injected flagd as the real flagd
// binary with the pod's arguments and environment (their ports rewritten to
// the host ports the node gives the pod's declared ports: there is no pod
// network; see test/node), volumes and service-account token, the
// OpenFeature Go SDK client as the binary of a known test image, anything
// else as an idle placeholder.
//
// One spec per delivery path: create the objects, wait until the pod is
// Ready, evaluate over the injected flagd's HTTP API on the node's remapped
// port (value, variant and reason), edit, see the new value served, delete,
// and assert what really follows:
//
//   - file: deleting the FeatureFlag deletes its ConfigMap; the running
//     flagd keeps its last projection (the node, like a kubelet, leaves a
//     deleted ConfigMap's files and records FailedMount);
//   - kubernetes: flagd runs under the pod's own service-account token, so
//     the spec fails unless flagplane's Role lets flagd list and watch;
//     deleting the FeatureFlag removes the Role and RoleBinding, and flagd
//     v0.16 keeps serving its last value (its kubernetes sync ignores the
//     deletion);
//   - flagd-proxy: deleting the FeatureFlag makes the sync server serve an
//     empty flag set: flagd answers FLAG_NOT_FOUND;
//   - grpc and http passthroughs, and an InProcessConfiguration (the Go SDK
//     configured by its injected environment alone): deleting the source
//     or configuration changes no running pod (admission acts on create,
//     rolloutOnChange is off), which keeps following its upstream; the pod
//     that replaces it comes without flagd or FLAGD_* variables;
//   - rolloutOnChange: a sidecar setting edited rolls the workload, the new
//     pod serves with it, the old one goes;
//   - the healer: a Deployment created before its source is rolled, with
//     the Event reason Targeted.
//
// The node's limits (package test/node) apply: in particular a ConfigMap
// edit is projected within milliseconds, where a kubelet takes up to a
// minute. No assertion is about time: timings are the benchmark's.
//
// The benchmarks beside the specs, run by `make bench`, use the same
// set-up: BenchmarkEditToServed measures FeatureFlag edit to new value
// served per provider; BenchmarkStagedRollout measures a promotion to the
// consumers of a rollout step serving it, and the edit path of a flag set
// with no rollout policy, with and without policies elsewhere. See
// docs/benchmarks.md.
package e2e
