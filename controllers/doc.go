// Package controllers wires informer events into the topology and the
// workflows' queues.
//
// Each kind has typed callbacks per event type (onFlagSetSpecChanged,
// onSourceTargetsChanged, onWorkloadLabelsChanged, onConfigMapDeleted, ...).
// A callback edits the topology and enqueues the keys of the returned Delta
// on the queue of the workflow that owns that output; it never computes
// desired state itself. Updates that change nothing relevant (resyncs,
// status-only writes) are dropped before they reach the graph.
//
// Each workflow's queue is run by a controller-runtime typed controller
// without a source (queue.go): the Deltas are its events. The startup pass
// reconciles every node once through the same reconcilers before the
// controllers start (docs/architecture.md, "The work queues").
//
// Reconciliation reads only the cache and the graph, never the API server.
package controllers
