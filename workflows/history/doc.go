// Package history keeps the revision history of FeatureFlags: every spec
// flagplane accepts is recorded as an immutable FeatureFlagRevision
// (delivery.flagplane.dev), as a ControllerRevision records a pod template.
//
// A spec is accepted when the graph's rendering of it is valid and not
// empty (topology.View.RenderedOf): the hash a revision records is the one
// the FeatureFlag's status.revision shows. The Reconciler, run on the
// leader only, reads the FeatureFlag, its revisions and the rollout
// policies of its namespace from the manager's cache and the rendering
// from the graph, never from the API server, and
//
//   - records a revision when the newest one (highest number) holds
//     another hash: number highest+1, named "<flag set>-<number>"
//     (RevisionName), labelled FlagSetLabel (FlagSetLabelValue), owned by
//     the FeatureFlag as its controller, with the spec's author (CreatedBy:
//     the field manager of the newest write of the object) and its
//     ChangeCauseAnnotation. A spec applied again, a rollback, gets a new
//     number: the history is an audit trail;
//   - deletes the oldest revisions beyond the flag set's limit
//     (Limit: its RevisionHistoryLimitAnnotation, else the
//     manager's --revision-history-limit, at most MaxLimit), never one
//     that a reader still needs (Prunable: the one the flag set serves,
//     those a rollout policy's status names), and before it records, so
//     that a full history never grows;
//   - adopts the revisions of the flag set that have no controller (left
//     by a FeatureFlag deleted with --cascade=orphan) and hold what they
//     claim (HoldsWhatItClaims), as a Deployment adopts orphaned
//     ReplicaSets; those another UID controls are the garbage collector's,
//     and only take numbers;
//   - records nothing that would pass the namespace's bound
//     (NamespaceLimit, --revision-namespace-limit) and takes the API
//     server's refusal of a revision (a ResourceQuota) for an answer: the
//     FeatureFlag is served all the same, a Warning Event
//     (EventRevisionNotRecorded) says it once per cause, its status says
//     it (workflows.UnrecordedRevisions, which the status workflow reads:
//     RevisionRecorded False), and it is tried again later, twice as late
//     each time.
//
// Creating is idempotent: a revision that exists with the same flag set,
// number and hash (a retry, or a second reconcile racing the first) is
// success. The pure parts (names, the author, the limit, what to prune)
// are functions of their inputs, unit-tested; test/history shows the whole
// on a real control plane.
//
// List gives the revisions of a flag set from a cache indexed with
// IndexRevisions, oldest first: what a rollout reads to find the spec of a
// revision it names.
package history
