// Package flagdversion holds the suite of the injected flagd release: the
// manager runs, on the real control plane, with --sidecar-tag v0.15.4 (the
// OpenFeature Operator's pin, which evaluates DISABLED flags and an empty
// targetingKey of fractional rules otherwise than flagd v0.16.0, and has
// no --sources field headers) and --flagd-tag v0.18.0 (a release flagplane
// does not vouch for); later with --sidecar-tag latest.
//
// It asserts what reaches real clients: the FeatureFlag webhook's warnings
// as a controller-runtime client and kubectl receive them, the
// FlagdVersionSupported condition and Warning Events of sources and
// Flagds, and a pod whose sidecar flagplane wrote for v0.15.4 running on
// the test node. Only flagd v0.16.0 is served by the Go module proxy, so
// the test node runs v0.16.0 whatever the image's tag: the pod shows that
// what flagplane writes for v0.15.4 runs, not how v0.15.4 evaluates.
package flagdversion
