// Package status reports what flagplane made of the objects people write:
// the status of FeatureFlags, FeatureFlagSources, InProcessConfigurations
// and FeatureFlagSourcePolicies, and, for workloads (which have no status of
// flagplane's), Warning Events on the annotations that name nothing usable.
//
// What it computes, from a topology.View, the operator's workflows.Settings
// and an Observed reader of what the cluster holds of the generated objects
// (the informer cache in the operator, CacheObserved):
//
//   - DesiredFlagSet: a FeatureFlag's Accepted and Consistent conditions
//     and its revision (the graph's rendering, which package flagsets
//     makes once per edit), its counts, and the revision each of its
//     observed consumers holds (Revision, Delivered, Consumers): its
//     generated ConfigMaps, and, per subscriber namespace, the sync
//     server's streams as every replica reports them (SyncReport, folded
//     by SyncReports, read through SyncObserved; only reports of the
//     manager's own namespace with SyncReportLabel are believed, see
//     SyncReportLabel on whom that trusts). What it cannot observe is
//     counted, not guessed: the workloads and Flagds that read the flag
//     set with the kubernetes provider (Unobserved); the kubelet's
//     projection of a ConfigMap into a pod is in no count. While the
//     revision history does not record its accepted spec (HistoryObserved,
//     workflows.UnrecordedRevisions), a RevisionRecorded False condition
//     says why. What it reads of the graph is gathered in one pass
//     (topology.View.FlagSetFacts), and the status is computed from that
//     value;
//   - DesiredSource: a FeatureFlagSource's Accepted (ValidateSource: what
//     the CRD schema cannot check), ResolvedRefs, ReferrersPermitted and
//     Programmed (every generated ConfigMap, Role and RoleBinding of its
//     workloads in place and up to date, settings another source
//     overrides), and its targets;
//   - DesiredInProcessConfig: an InProcessConfiguration's targets and
//     ReferrersPermitted;
//   - DesiredSourcePolicy: a FeatureFlagSourcePolicy's Accepted (it targets
//     its own namespace) and Enforced (on how many of the namespace's
//     sidecars its settings are in force, what of it did not apply), from
//     the injection of every sidecar it governs;
//   - AnnotationWarnings: what a workload's openfeature.dev annotations
//     name in vain (missing, or in another namespace without a
//     ReferenceGrant), which the Pod webhook returns as admission warnings
//     too.
//
// What it applies: the Updater writes a status with Status().Update only
// when it differs, with a Warning Event when a condition turns False; the
// AnnotationReporter sends a workload's warnings when they change.
package status
