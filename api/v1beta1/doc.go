// Package v1beta1 holds the core.openfeature.dev/v1beta1 API served by
// flagplane: FeatureFlag (a flag set in flagd's format), FeatureFlagSource (how
// flags reach workloads, and which workloads), InProcessConfiguration (env
// vars for in-process SDKs) and Flagd (a standalone flagd with a Service).
//
// The schema is a superset of the OpenFeature Operator's v1beta1: every field,
// JSON name, default and enum of that API is kept, so existing manifests apply
// unchanged. flagplane adds workload targeting (targetRefs, selector) and
// status on every kind.
//
// # The status contract
//
// Every kind has status.observedGeneration and conditions whose
// observedGeneration says which spec they judge. A condition is True only
// when what it claims holds now, as flagplane last observed the cluster.
//
// # Ready, Reconciling, Stalled
//
// Every kind also summarises its own conditions in the three that kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus) reads, and with it Flux, kubectl wait
// and flagplane's Argo CD health checks (config/gitops, docs/gitops.md).
// Exactly one is True; all three carry the deciding reason and the
// object's generation, and Ready and the True one its message:
//   - Ready: the object does what it asks (kstatus Current, Argo CD
//     Healthy).
//   - Reconciling: not yet, and flagplane is at work or waits for what may
//     still appear: a flag set or source not found, Pending, an
//     Unavailable Flagd, consumers behind (InProgress, Progressing).
//   - Stalled: not, until a user acts: Invalid, RefNotPermitted, a write
//     refused for good (ApplyFailed on a name taken by an object flagplane
//     does not manage, a forbidden, invalid or too large object),
//     UnsupportedSettings, GatewayAPINotInstalled, a flag set that is
//     invalid (a source Pending on it), a flag set too large for the
//     delivery mode of a consumer (FlagSetTooLarge), a Flagd Deployment
//     past its progress deadline (ProgressDeadlineExceeded) (Failed,
//     Degraded).
//
// What they summarise: a FeatureFlag, Accepted and its delivery (Ready once
// every consumer flagplane observes holds its revision; Delivering while
// one does not; DeliveryFailed when a write of its ConfigMap was refused
// for good; FlagSetTooLarge when it is larger than the delivery mode of a
// consumer carries, see below); a FeatureFlagSource, Accepted, ResolvedRefs, Programmed and
// FlagdVersionSupported; a Flagd, those and Available; an
// InProcessConfiguration, Accepted. Consistent and ReferrersPermitted are
// left out (flagd serves a flag set with probable mistakes; other
// namespaces' workloads do not make a source's delivery fail), and so is
// FlagdVersionSupported with reason UnsupportedFlagdVersion (flagplane
// still delivers to a tag it cannot vouch for). The CRDs default status to
// observedGeneration 0, so that an object flagplane has not judged yet is
// InProgress, not Current.
//
// FeatureFlag:
//   - Accepted: flagd can load the flag set. False (Invalid): workloads keep
//     its last valid content; the message says what is wrong.
//   - Ready False, Stalled True with reason FlagSetTooLarge: the flag set,
//     as rendered for flagd, is larger than a delivery mode its consumers
//     read it with carries: a ConfigMap's data (file provider: 1 MiB, the
//     API server's limit, counted over the values' bytes) or a sync
//     message flagd takes (flagd-proxy: 4 MiB). Its consumers keep the last
//     content that fitted: no ConfigMap write the API server would refuse
//     is made, the sync server does not send it. The message names the
//     flag set, its size, the limit, the ConfigMaps or sources affected
//     and the providers that can carry it (the kubernetes provider has no
//     limit of its own). A Warning Event (FlagSetTooLarge) says the same.
//     The admission webhook refuses such an edit when it knows of such
//     consumers, and warns otherwise.
//
// FeatureFlagSource:
//   - Accepted: the spec is valid. False (Invalid).
//   - ResolvedRefs: every flag set it names exists and may be read. False
//     (FlagSetNotFound, or RefNotPermitted across namespaces without a
//     ReferenceGrant; the latter whether or not the flag set exists).
//   - ReferrersPermitted: every workload of another namespace whose
//     annotation names it may use it. False (RefNotPermitted) names the
//     workloads that may not (at most ten); nothing is applied to them.
//   - Programmed: everything the source asks for is in place for every
//     workload it targets, and it asks for nothing that cannot be (the READY
//     column). False: Invalid (not accepted), UnresolvedRefs (a flag set
//     reference does not resolve), Pending (a ConfigMap or Role not written
//     or not up to date yet, or a flag set that is invalid), ApplyFailed (a
//     write failed; the message names the object, kind and namespace/name,
//     and what the API server answered, its reason and message, e.g. a
//     name taken by an object flagplane does not manage),
//     FlagSetTooLarge (a flag set it delivers is larger than the provider
//     of its entry carries: the message names the flag set, its size, the
//     limit and the providers that can carry it; its workloads keep the
//     last content that fitted; with a Warning Event of that reason; the
//     admission webhook refuses an entry that would deliver so). True with
//     reason SettingsConflict
//     when another source wins one of its sidecar settings on a shared
//     workload (the message says which, and to whom).
//   - FlagdVersionSupported: the flagd release its sidecars run (the
//     manager's --sidecar-tag) is one flagplane vouches for — every flagd
//     release from v0.10.0 to v0.16.1, whose flags and --sources fields
//     flagplane writes by — and it takes everything the source asks for.
//     True (SupportedFlagdVersion) also says how that release evaluates
//     flags otherwise than v0.16.0, if it does. False:
//     UnsupportedFlagdVersion (a tag such as latest, a digest or a release
//     outside that list: flagplane writes for v0.16.0 and cannot tell
//     whether the image takes it), UnsupportedSettings (the release lacks
//     a setting of the source — a flag such as --context-value, a
//     provider, the --sources field headers that a flagd-proxy entry needs
//     for the sync server's credential — which its sidecars go without;
//     the message lists them).
//
// InProcessConfiguration:
//   - Accepted: the spec is valid.
//   - ReferrersPermitted: as for a source.
//
// Flagd:
//   - Accepted: the spec is valid. False (Invalid).
//   - ResolvedRefs: its FeatureFlagSource exists and may be used. False
//     (SourceNotFound, or RefNotPermitted across namespaces without a
//     ReferenceGrant, whether or not the source exists).
//   - Programmed: every object generated for it (Deployment, Service,
//     Ingress, HTTPRoute, ConfigMaps, RBAC) is in place as desired. False:
//     Invalid, UnresolvedRefs, Pending, ApplyFailed (e.g. a name taken by an
//     object flagplane does not manage), GatewayAPINotInstalled (an
//     HTTPRoute is asked for and Gateway API's CRDs are not installed),
//     FlagSetTooLarge (a flag set it reads from a ConfigMap is larger than
//     a ConfigMap holds: its pods keep the last content that fitted).
//   - Available: at least one flagd pod is ready (status.readyReplicas).
//   - FlagdVersionSupported: as for a source, for the release the
//     Deployment runs (--flagd-tag, else --sidecar-tag).
//
// Events are recorded when a condition turns False, not on every retry
// (FlagdVersionSupported: reason UnsupportedFlagdVersion). A write that
// fails is a Warning Event ApplyFailed on the FeatureFlag (its ConfigMap),
// the workload (its Role and RoleBinding) or the Flagd (its objects), in
// the words of the condition: the object and the API server's reason.
//
// +kubebuilder:object:generate=true
// +groupName=core.openfeature.dev
package v1beta1
