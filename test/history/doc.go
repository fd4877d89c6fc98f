// Package history tests the revision history of FeatureFlags
// (workflows/history, the spec-author webhook, flagplane history and
// rollback) on the real control plane, with the manager of test/operator:
// every accepted edit makes exactly one FeatureFlagRevision, with the hash
// status.revision shows, its author as the API server authenticated them
// (impersonated users), the field manager their client named and its
// change cause; a spec flagd refuses makes none; the history is pruned to a
// FeatureFlag's limit (at most 100) but for the revision it serves; the
// revisions a FeatureFlag deleted with --cascade=orphan left are adopted; a
// namespace at the manager's bound and a ResourceQuota's refusal record
// nothing, say so and back off; the API server refuses to change a
// revision; the garbage collector deletes a FeatureFlag's history with it;
// and the command line lists, prints, compares and rolls back revisions.
//
// The manager serves its webhooks (config/webhook, installed by envtest),
// with FeatureFlag validation off (--flags-validation=false), so that a
// spec its validator would refuse reaches it, as one would with
// validation off. kube-controller-manager runs the resourcequota
// controller, and the manager --revision-namespace-limit=8.
package history
