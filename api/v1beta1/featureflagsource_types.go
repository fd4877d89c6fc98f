package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncProviderType says how flagd gets a flag set: from a file (a ConfigMap
// that flagplane generates), by watching the FeatureFlag (kubernetes), from
// flagplane's sync server (flagd-proxy), or from a remote store.
// +kubebuilder:validation:Enum="";kubernetes;file;http;grpc;gcs;azblob;s3;flagd-proxy
type SyncProviderType string

// Sync providers.
const (
	SyncProviderKubernetes SyncProviderType = "kubernetes"
	SyncProviderFile       SyncProviderType = "file"
	SyncProviderHTTP       SyncProviderType = "http"
	SyncProviderGRPC       SyncProviderType = "grpc"
	SyncProviderGCS        SyncProviderType = "gcs"
	SyncProviderAzureBlob  SyncProviderType = "azblob"
	SyncProviderS3         SyncProviderType = "s3"
	SyncProviderFlagdProxy SyncProviderType = "flagd-proxy"
)

// ReferencesFlagSet tells whether a source entry of this provider names a
// FeatureFlag (as `name` or `namespace/name`) rather than a remote URI.
func (p SyncProviderType) ReferencesFlagSet() bool {
	switch p {
	case SyncProviderFile, SyncProviderKubernetes, SyncProviderFlagdProxy:
		return true
	}
	return false
}

// FeatureFlagSourceSpec is the desired state of a FeatureFlagSource: the flagd
// sidecar's settings, where its flags come from, and (new in flagplane) which
// workloads it applies to.
// +kubebuilder:validation:XValidation:rule="!has(self.targetRefs) || !has(self.selector)",message="set targetRefs or selector, not both"
type FeatureFlagSourceSpec struct {
	// ManagementPort is flagd's management (health, metrics) port.
	// +optional
	// +kubebuilder:default:=8014
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ManagementPort int32 `json:"managementPort,omitempty"`

	// Port is flagd's evaluation port.
	// +optional
	// +kubebuilder:default:=8013
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// SocketPath makes flagd listen on a unix socket.
	// +optional
	SocketPath string `json:"socketPath,omitempty"`

	// Evaluator is flagd's evaluator.
	// +optional
	// +kubebuilder:default:="json"
	Evaluator string `json:"evaluator,omitempty"`

	// Sources are the flag sources of the sidecar. The OpenFeature
	// Operator sets no bound; flagplane takes up to 256 entries, far more
	// than a sidecar is likely to read, and checks on admission what bounds
	// them for real: flagd's --sources argument (one entry per flag set,
	// 350 to 950 bytes by provider for the longest namespace and name)
	// must stay within the 128 KiB Linux takes in one argument.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Sources []Source `json:"sources"`

	// EnvVars are set on the sidecar, each name prefixed with EnvVarPrefix.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	EnvVars []corev1.EnvVar `json:"envVars,omitempty"`

	// SyncProviderArgs are key=value arguments passed to every sync provider.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	SyncProviderArgs []string `json:"syncProviderArgs,omitempty"`

	// DefaultSyncProvider is the provider of source entries that name none.
	// +optional
	DefaultSyncProvider SyncProviderType `json:"defaultSyncProvider,omitempty"`

	// LogFormat is the sidecar's log format.
	// +optional
	// +kubebuilder:default:="json"
	LogFormat string `json:"logFormat,omitempty"`

	// EnvVarPrefix prefixes every env var set from this source.
	// +optional
	// +kubebuilder:default:="FLAGD"
	EnvVarPrefix string `json:"envVarPrefix,omitempty"`

	// RolloutOnChange restarts the targeted workloads when their sidecar
	// configuration changes.
	// +optional
	RolloutOnChange *bool `json:"rolloutOnChange,omitempty"`

	// ProbesEnabled adds liveness and readiness probes to the sidecar (default true).
	// +optional
	ProbesEnabled *bool `json:"probesEnabled,omitempty"`

	// DebugLogging runs the sidecar with --debug (default false).
	// +optional
	DebugLogging *bool `json:"debugLogging,omitempty"`

	// KeepAliveMinTime is how often, at most, flagd's sync server lets a
	// client send gRPC keepalive pings (flagd's --keep-alive-min-time, read
	// from FLAGD_KEEP_ALIVE_MIN_TIME): a client that pings more often is
	// sent GOAWAY. A Go duration ("30s"). Unset: flagd's default (30s).
	// flagd reads it from v0.16.1; for an older release it is left out,
	// and FlagdVersionSupported says so. From the OpenFeature Operator
	// v0.9.3.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	KeepAliveMinTime *metav1.Duration `json:"keepAliveMinTime,omitempty"`

	// KeepAlivePermitWithoutStream lets clients of flagd's sync server ping
	// while they hold no stream (--keep-alive-permit-without-stream, read
	// from FLAGD_KEEP_ALIVE_PERMIT_WITHOUT_STREAM). Unset: flagd's default
	// (true). flagd reads it from v0.16.1. From the OpenFeature Operator
	// v0.9.3.
	// +optional
	KeepAlivePermitWithoutStream *bool `json:"keepAlivePermitWithoutStream,omitempty"`

	// OtelCollectorUri makes the sidecar export metrics and traces to this collector.
	// +optional
	OtelCollectorUri string `json:"otelCollectorUri,omitempty"` //nolint:revive // JSON name fixed by the OpenFeature API.

	// Resources of the sidecar; the operator's defaults fill what is unset.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// ContextValues are static key-value pairs added to every evaluation context.
	// +optional
	ContextValues map[string]string `json:"contextValues,omitempty"`

	// HeaderToContextMappings maps request header names to evaluation context keys.
	// +optional
	HeaderToContextMappings map[string]string `json:"headerToContextMappings,omitempty"`

	// CORS lists the origins allowed to call the sidecar's HTTP endpoints.
	// +optional
	CORS []string `json:"cors,omitempty"`

	// OFREPPort is the sidecar's OFREP port.
	// +optional
	// +kubebuilder:default:=8016
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	OFREPPort int32 `json:"ofrepPort,omitempty"`

	// TargetRefs names the workloads of this namespace that get the sidecar,
	// without any annotation on them. New in flagplane.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(o, o.kind == r.kind && o.name == r.name))",message="targetRefs must not name a workload twice"
	TargetRefs []TargetRef `json:"targetRefs,omitempty"`

	// Selector selects the workloads of this namespace that get the sidecar,
	// by the labels of the workload. New in flagplane.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Source is one flag source of a sidecar.
type Source struct {
	// Source is a FeatureFlag (`name` or `namespace/name`) for the file,
	// kubernetes and flagd-proxy providers, or a URI for the others.
	// +kubebuilder:validation:MinLength=1
	Source string `json:"source"`

	// Provider is how flagd reads the source; DefaultSyncProvider, then
	// the operator's default (file), when empty.
	// +optional
	Provider SyncProviderType `json:"provider,omitempty"`

	// HttpSyncBearerToken is the bearer token of the http provider.
	// +optional
	HttpSyncBearerToken string `json:"httpSyncBearerToken,omitempty"` //nolint:revive // JSON name fixed by the OpenFeature API.

	// TLS enables TLS for the grpc provider.
	// +optional
	TLS bool `json:"tls,omitempty"`

	// CertPath is the certificate of the grpc provider's TLS connection.
	// +optional
	CertPath string `json:"certPath,omitempty"`

	// ProviderID identifies the client to a grpc sync server.
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// Selector is the flag set selector sent to a grpc sync server.
	// +optional
	Selector string `json:"selector,omitempty"`

	// The minimum keeps out negative values, which format int32 alone
	// accepts and which no client can decode into this uint32: one such
	// object would break every typed list and watch of sources.

	// Interval is the http provider's poll interval in seconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Interval uint32 `json:"interval,omitempty"`
}

// TargetRef names a workload in the source's own namespace.
// +kubebuilder:validation:XValidation:rule="self.group == 'apps'",message="targetRefs group must be apps"
// +kubebuilder:validation:XValidation:rule="self.kind in ['Deployment', 'StatefulSet', 'DaemonSet']",message="targetRefs kind must be Deployment, StatefulSet or DaemonSet"
type TargetRef struct {
	// Group of the workload: apps.
	// +optional
	// +kubebuilder:default:="apps"
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// Kind of the workload: Deployment, StatefulSet or DaemonSet.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// FeatureFlagSourceStatus is the observed state of a FeatureFlagSource.
type FeatureFlagSourceStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted (the spec is valid), ResolvedRefs (every flag set
	// it names exists and may be read), ReferrersPermitted (no workload of
	// another namespace names it without a ReferenceGrant), Programmed
	// (every targeted workload has what it needs), FlagdVersionSupported
	// (flagplane vouches for the flagd release its sidecars run, which takes
	// everything the source asks for). See the package documentation for
	// the whole contract.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TargetCount is the number of workloads this source applies to.
	// +optional
	TargetCount int32 `json:"targetCount,omitempty"`

	// Targets lists the workloads this source applies to, by any means
	// (targetRefs, selector or their own annotations), capped at 256.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Targets []WorkloadReference `json:"targets,omitempty"`
}

// WorkloadReference names a workload. Namespace is set only when it differs
// from the referrer's: a workload may name a source of another namespace in
// its openfeature.dev/featureflagsource annotation.
type WorkloadReference struct {
	Kind string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=ffs
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FeatureFlagSource configures the flagd sidecar of the workloads it
// applies to and the flag sources the sidecar reads.
type FeatureFlagSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FeatureFlagSourceSpec `json:"spec,omitempty"`
	// Status is defaulted to observedGeneration 0 until flagplane writes
	// it, so that kstatus tells a new object (InProgress: generation 1 not
	// observed yet) from a delivered one.
	// +kubebuilder:default={observedGeneration: 0}
	Status FeatureFlagSourceStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FeatureFlagSourceList is a list of FeatureFlagSource.
type FeatureFlagSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureFlagSource `json:"items"`
}
