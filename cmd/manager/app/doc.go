// Package app builds and runs the flagplane manager: the controller-runtime
// manager with flagplane's controllers, Prometheus metrics, health and
// readiness probes, the /debug/topology endpoint and, when enabled, leader
// election and namespace-scoped caches.
//
// cmd/manager is a thin main around it; test/operator runs the same manager
// in-process for the demo (hack/demo) and the suites, so that what they show
// is what the binary does.
package app
