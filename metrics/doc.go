// Package metrics is flagplane's Prometheus instrumentation: a Recorder that
// implements controllers.Metrics (informer events, topology deltas,
// reconcile latencies, writes), gauges of the topology's nodes by kind read
// at scrape time, and hooks for the flagd sync server's subscribers.
//
// Work-queue depth, adds, latency and retries come from controller-runtime's
// workqueue metrics (workqueue_depth{name="configmaps"|"status"|"workloads"|
// "flagds"|"healer"}), which every named client-go work queue reports into
// the same registry; reconcile counts and latencies of those controllers
// come from controller-runtime too (controller_runtime_reconcile_total{
// controller="healer"}, ...).
//
// Every metric is prefixed with flagplane_ and registered on the registry
// given to New, usually controller-runtime's metrics.Registry, which the
// manager serves on its metrics endpoint.
package metrics
