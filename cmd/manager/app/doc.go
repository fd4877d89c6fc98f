// Package app builds and runs the flagplane manager: the controller-runtime
// manager with flagplane's controllers, Prometheus metrics, health and
// readiness probes, the /debug/topology endpoint and, when enabled, leader
// election and namespace-scoped caches.
//
// cmd/manager is a thin main around it; the demo (hack/demo) and the install
// suite (test/install) run the same manager in-process, so that what they
// show is what the binary does.
package app
