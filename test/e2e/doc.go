// Package e2e runs every way flagplane delivers flags end to end, with
// nothing standing in for what Kubernetes and flagd do: a real control
// plane with kube-scheduler (test/controlplane), the whole operator with
// its admission webhooks and its flagd sync server (test/operator), and
// the test node (test/node), which runs the pods the ReplicaSet controller
// creates and admission mutates — the injected flagd as the real flagd
// binary with the pod's exact arguments, environment, volumes and
// service-account token, the OpenFeature Go SDK client as the binary of a
// known test image, anything else as an idle placeholder.
//
// One spec per delivery path: create the objects, wait until the pod is
// Ready, evaluate over the injected flagd's HTTP API on the node's remapped
// port (value, variant and reason), edit, see the new value served, delete,
// and assert what really follows. The node's limits (package test/node)
// apply: in particular a ConfigMap edit is projected within milliseconds,
// where a kubelet takes up to a minute.
//
// The benchmark beside the specs (BenchmarkEditToServed, run by `make
// bench`) measures FeatureFlag edit to new value served per provider on the
// same set-up; see docs/benchmarks.md.
package e2e
