package v1beta1

// Pod-template annotations by which a workload opts in the OpenFeature
// Operator way. They are user input: flagplane reads them and never writes them.
const (
	// AnnotationSidecarSecurityContext, on a FeatureFlagSource, relaxes the
	// injected sidecar's hardened securityContext (flagplane's own; see
	// injection.AnnotationSidecarSecurityContext for when it is honoured).
	AnnotationSidecarSecurityContext = "flagplane.core.openfeature.dev/sidecar-security-context"
	// AnnotationEnabled must be "true" for the other annotations to count.
	AnnotationEnabled = "openfeature.dev/enabled"
	// AnnotationFeatureFlagSource lists sources as `name` or `namespace/name`, comma-separated.
	AnnotationFeatureFlagSource = "openfeature.dev/featureflagsource"
	// AnnotationInProcessConfiguration lists in-process configurations the same way.
	AnnotationInProcessConfiguration = "openfeature.dev/inprocessconfiguration"
)

// Labels and names on what flagplane generates.
const (
	// LabelManagedBy marks generated objects so that informers can select them.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on generated objects
	// unless the manager's --managed-by says another
	// (workflows.GeneratedMetadata); objects with this value stay
	// flagplane's whatever --managed-by says.
	ManagedByValue = "flagplane"
	// FieldManager is the server-side apply field manager of flagplane.
	FieldManager = "flagplane"
)

// Condition types.
const (
	// ConditionAccepted: the object's spec is valid.
	ConditionAccepted = "Accepted"
	// ConditionResolvedRefs: every object the spec refers to exists and may be used.
	ConditionResolvedRefs = "ResolvedRefs"
	// ConditionProgrammed: everything the object asks for is in place.
	ConditionProgrammed = "Programmed"
	// ConditionReferrersPermitted, on a FeatureFlagSource or an
	// InProcessConfiguration: every workload of another namespace whose
	// pod-template annotation names it is permitted to by a ReferenceGrant.
	// False lists the workloads that are not (nothing is applied to them).
	ConditionReferrersPermitted = "ReferrersPermitted"
	// ConditionConsistent, on a FeatureFlag: nothing in the flag set is
	// probably a mistake (a $ref to an evaluator it does not define, a
	// variant its targeting returns that the flag does not have, a variant
	// nothing can return, ...). False lists what is: flagd loads such a flag
	// set and flagplane serves it, unless the manager runs with
	// --strict-validation (then it is not Accepted either).
	ConditionConsistent = "Consistent"
	// ConditionAvailable, on a Flagd: at least one flagd pod is ready to serve.
	ConditionAvailable = "Available"
	// ConditionFlagdVersionSupported, on a FeatureFlagSource and a Flagd:
	// the flagd release flagplane injects for it (the manager's
	// --sidecar-tag; a Flagd's --flagd-tag) is one flagplane vouches for,
	// and that release takes everything the object asks for. False says
	// which release and, for one it vouches for, what of the object its
	// flagd goes without.
	ConditionFlagdVersionSupported = "FlagdVersionSupported"

	// The summary conditions, on every kind, after kstatus's conventions
	// (sigs.k8s.io/cli-utils/pkg/kstatus), which Flux, kubectl wait tools
	// and flagplane's Argo CD health checks read. Exactly one of them is
	// True, and all three carry the reason and message of what decided.
	//
	// ConditionReady: the object does what it asks, as last observed.
	ConditionReady = "Ready"
	// ConditionReconciling: it does not yet, and flagplane is at work or
	// waits for something that may still appear (a flag set, a source, a
	// ready flagd pod, a write to retry).
	ConditionReconciling = "Reconciling"
	// ConditionStalled: it does not, and only a user's action can change
	// that: an invalid spec, a reference tenancy forbids, a write refused
	// for good (a name taken by an object flagplane does not manage, a
	// forbidden or invalid object), a setting its flagd release lacks, an
	// API that is not installed.
	ConditionStalled = "Stalled"
)

// Condition reasons.
const (
	ReasonAccepted           = "Accepted"
	ReasonInvalid            = "Invalid"
	ReasonResolvedRefs       = "ResolvedRefs"
	ReasonFlagSetNotFound    = "FlagSetNotFound"
	ReasonRefNotPermitted    = "RefNotPermitted"
	ReasonProgrammed         = "Programmed"
	ReasonPending            = "Pending"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonNoTargets          = "NoTargets"
	ReasonSettingsConflict   = "SettingsConflict"
	ReasonReferrersPermitted = "ReferrersPermitted"
	ReasonUnresolvedRefs     = "UnresolvedRefs"
	ReasonConsistent         = "Consistent"
	ReasonProbableMistakes   = "ProbableMistakes"
	// Reasons of a Flagd's conditions.
	ReasonSourceNotFound         = "SourceNotFound"
	ReasonGatewayAPINotInstalled = "GatewayAPINotInstalled"
	ReasonAvailable              = "Available"
	ReasonUnavailable            = "Unavailable"
	// Reasons of FlagdVersionSupported: the release is vouched for and
	// takes everything asked (SupportedFlagdVersion); it is not vouched for
	// (UnsupportedFlagdVersion: flagplane writes for flagd v0.16.0 and
	// cannot tell whether that image takes it); it is, but lacks a setting
	// the object makes, which is left out (UnsupportedSettings).
	ReasonSupportedFlagdVersion   = "SupportedFlagdVersion"
	ReasonUnsupportedFlagdVersion = "UnsupportedFlagdVersion"
	ReasonUnsupportedSettings     = "UnsupportedSettings"
	// ReasonReady is the reason of Ready when it is True (and of
	// Reconciling and Stalled, then False).
	ReasonReady = "Ready"
	// Reasons of a FeatureFlag's summary: some consumer does not hold its
	// current revision yet (Delivering), or one cannot get it until a user
	// acts (DeliveryFailed: a write of its ConfigMap refused for good).
	ReasonDelivering     = "Delivering"
	ReasonDeliveryFailed = "DeliveryFailed"
	// Reasons of a FeatureFlag's summary once every copy holds its
	// revision: some pod's flagd does not answer with it yet (Confirming:
	// the kubelet projects a ConfigMap at its sync, a pod starts), or still
	// does not past the confirmation bound (NotConfirmed: its flagd stopped,
	// refused the content, or its volume is not updated; the message names
	// the pod and what its flagd answered).
	ReasonConfirming   = "Confirming"
	ReasonNotConfirmed = "NotConfirmed"
	// ReasonProgressDeadlineExceeded: a Flagd's Deployment stopped
	// progressing (its Progressing condition says so).
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonFlagSetTooLarge: a flag set's rendering is larger than the
	// delivery mode of some of its consumers carries (a ConfigMap's 1 MiB
	// for the file provider, flagd's 4 MiB sync message for flagd-proxy),
	// so they keep its last content that fitted. On a FeatureFlag's Ready
	// and Stalled, and on a source's Programmed; the message names the
	// flag set, its size, the limit and the providers that can carry it.
	// Only a user can fix it: Stalled.
	ReasonFlagSetTooLarge = "FlagSetTooLarge"
	// ReasonSidecarRefused: the flagd sidecar of some workloads a source
	// applies to is not injected, because it would pass a limit of what a
	// pod carries (an argument longer than Linux's execve takes: flagd
	// could not start), alone or with the other sources of those
	// workloads. On a source's Programmed; the message names the workloads,
	// the size and the limit. Only a user can fix it: Stalled.
	ReasonSidecarRefused = "SidecarRefused"
	// ReasonRollingOut: a FeatureFlagRolloutPolicy stages the flag set's
	// revision; some consumers serve the stable revision until their step
	// (on a FeatureFlag's Reconciling). ReasonRolloutHalted: the rollout
	// halted on a failing gate or was aborted, and every consumer serves
	// the stable revision until a user edits the flag set (Stalled).
	ReasonRollingOut    = "RollingOut"
	ReasonRolloutHalted = "RolloutHalted"
)
