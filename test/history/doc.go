// Package history tests the revision history of FeatureFlags
// (workflows/history, flagplane history and rollback) on the real control
// plane, with the manager of test/operator: every accepted edit makes
// exactly one FeatureFlagRevision, with the hash status.revision shows, its
// author's field manager and its change cause; a spec flagd refuses makes
// none; the history is pruned to a FeatureFlag's limit but for the
// revision it serves; the API server refuses to change a revision; the
// garbage collector deletes a FeatureFlag's history with it; and the
// command line lists, prints, compares and rolls back revisions.
//
// The manager runs without its admission webhooks, so that a spec its
// validator would refuse reaches it, as one would with the webhooks off
// or failing open.
package history
