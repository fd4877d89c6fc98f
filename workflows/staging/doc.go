// Package staging is staged delivery's one home: it moves a
// FeatureFlagRolloutPolicy from step to step as the step's consumers serve
// the new revision, its pause passes and its approval comes, and halts it
// when a gate fails. It decides nothing about who serves what: the
// topology's plan (topology.View.RolloutPlan) reads the status this package
// writes.
//
// Its parts, a file each:
//
//   - next.go: Next, the whole state machine, a pure function of the
//     policy, the plan and what was observed (golden files in
//     testdata/golden: objects → plan and next step);
//   - gates.go: the gates' judgement of pods and values, pure;
//   - reconciler.go: the reconcile, which reads the cache and the graph,
//     calls Next and writes the policy's status and Events;
//   - probe.go: the gates' reads of the outside (flagd's metrics on a
//     pod, a Prometheus query), in the background, bounded per policy and
//     per namespace, through the one hardened client of workflows/outbound;
//   - metrics.go and prometheus.go: the parsers of what those reads
//     answer, which read every answer as hostile; and the confinement of
//     a Prometheus query to the consumers' namespaces;
//   - pacing.go: the pacing of progress-only status writes.
//
// Everything the machine needs to resume is in the policy's status (the
// revisions, the rollout's number, the phase, the step and when it was
// served), so a restart or a new leader continues exactly where the last
// one stood. The gates' readings (and the EvaluationErrors baselines) are
// the leader's memory.
package staging
