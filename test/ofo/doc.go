// Package ofo runs the OpenFeature Operator's (v0.9.2) end-to-end
// scenarios — its chainsaw tests — against flagplane: one spec per
// scenario, with manifests in the OpenFeature Operator's shape (testdata,
// one folder per scenario, named as the OpenFeature Operator names it)
// applied unchanged with kubectl, as a user moving over would apply theirs.
//
// Each spec asserts what its scenario asserts, except pod phase: the pod's
// labels, annotations, containers and injected flagd init container (lists
// as chainsaw matches them: same length, element by element), the env of
// in-process pods, and whether a FeatureFlag is admitted and stored. Where
// the scenario's curl Job asks flagd for a flag, the spec asks the flagd
// that admission injected, as the real flagd binary run by the test node
// (test/node), the same request on the same path. Where flagplane differs
// on purpose (the flagd image's tag, a warning on admission), the spec says
// so and docs/openfeature-operator.md, "Differences", lists it.
//
// The cluster: a control plane with kube-scheduler (test/controlplane),
// flagplane's manager with its admission webhooks and its flagd sync server
// (test/operator), installed with --sidecar-tag and --flagd-tag naming the
// flagd release the node runs — the flagd image a spec expects is its
// scenario's, with that tag, never flagplane's own default — and a test
// node that runs the pods (test/node): flagd images as flagd, every other
// image (nginx, busybox, curl) as an idle placeholder.
//
//	go test ./test/ofo
//
// Scenario by scenario: flagd-disabled, fsconfig-file-sync,
// fsconfig-k8s-sync and fsconfig-flagd-proxy-sync (sidecar_test.go),
// in-process (inprocess_test.go), validate-featureflag-create and
// validate-featureflag-update (validation_test.go).
//
// The OpenFeature Operator's four scenarios of its Flagd kind
// (flagd-with-custom-ports, flagd-with-ingress-default-paths,
// flagd-with-ingress-custom-paths, flagd-with-gateway-api) are in
// flagd_test.go, their testdata with assert files in chainsaw's shape; with
// custom ports, flagd's container declares the ports it listens on and the
// Service targets them, where the OpenFeature Operator declares and targets
// 8013 and 8014 while flagd listens on 8888 and 9999.
package ofo
