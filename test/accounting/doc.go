// Package accounting holds the Ginkgo suite that counts what the manager
// asks of the API server, on a control plane of its own so that nothing
// else writes meanwhile: every request of the manager's clients passes the
// counting transport of its rest.Config (metrics.APIRequests, which it also
// serves as flagplane_api_requests_total), and each spec takes the counts
// once the manager is ready and has settled (no key waiting, being
// reconciled or retried, and its caches hold what the API server holds), so
// they are about the steady state, not the start-up.
//
// What it proves: a FeatureFlag edit whose flag set is used in k namespaces
// makes exactly k ConfigMap writes and no read; informer resyncs make no
// request and run no reconciliation; a manager restarted with nothing
// changed writes nothing.
package accounting
