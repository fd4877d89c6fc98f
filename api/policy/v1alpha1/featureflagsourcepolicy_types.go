package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MergeStrategy says how a block of a policy merges with the settings of
// the sources (see the package doc).
// +kubebuilder:validation:Enum=merge;atomic
type MergeStrategy string

// Merge strategies.
const (
	// StrategyMerge merges setting by setting, and map or env entry by entry.
	StrategyMerge MergeStrategy = "merge"
	// StrategyAtomic applies the block as one unit.
	StrategyAtomic MergeStrategy = "atomic"
)

// FeatureFlagSourcePolicySpec is the desired state of a FeatureFlagSourcePolicy.
// +kubebuilder:validation:XValidation:rule="has(self.defaults) || has(self.overrides)",message="a policy sets defaults, overrides or both"
type FeatureFlagSourcePolicySpec struct {
	// TargetRef is the Namespace the policy governs: the one it lives in.
	TargetRef PolicyTargetReference `json:"targetRef"`

	// Defaults apply to every setting that none of a workload's sources sets.
	// +optional
	Defaults *SourceSettingsBlock `json:"defaults,omitempty"`

	// Overrides replace what the sources set.
	// +optional
	Overrides *SourceSettingsBlock `json:"overrides,omitempty"`
}

// PolicyTargetReference names the object a policy attaches to, as Gateway
// API's LocalPolicyTargetReference does.
type PolicyTargetReference struct {
	// Group is the target's API group: "" (core) for a Namespace.
	// +kubebuilder:validation:Enum=""
	Group string `json:"group"`
	// Kind is the target's kind.
	// +kubebuilder:validation:Enum=Namespace
	Kind string `json:"kind"`
	// Name is the target's name: the policy's own namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

// SourceSettingsBlock is a set of sidecar settings and how it merges.
type SourceSettingsBlock struct {
	// Strategy is how the block merges with the sources' settings.
	// +optional
	// +kubebuilder:default=merge
	Strategy MergeStrategy `json:"strategy,omitempty"`

	SourceSettings `json:",inline"`
}

// SourceSettings are the settings of a FeatureFlagSource that shape the
// flagd sidecar, with the same names and meaning. A field left out (zero)
// is not set by the policy.
type SourceSettings struct {
	// ManagementPort is flagd's management (metrics, health) port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ManagementPort int32 `json:"managementPort,omitempty"`
	// Port is flagd's evaluation port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// OFREPPort is flagd's OFREP port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	OFREPPort int32 `json:"ofrepPort,omitempty"`
	// Evaluator is flagd's evaluator.
	// +optional
	Evaluator string `json:"evaluator,omitempty"`
	// LogFormat is flagd's log format.
	// +optional
	// +kubebuilder:validation:Enum=json;console
	LogFormat string `json:"logFormat,omitempty"`
	// EnvVarPrefix is the prefix of the env vars flagplane gives flagd and
	// the application.
	// +optional
	EnvVarPrefix string `json:"envVarPrefix,omitempty"`
	// OtelCollectorUri is the OpenTelemetry collector flagd exports metrics to.
	// +optional
	OtelCollectorUri string `json:"otelCollectorUri,omitempty"` //nolint:revive // the FeatureFlagSource field's JSON name.
	// ProbesEnabled turns flagd's probes on or off.
	// +optional
	ProbesEnabled *bool `json:"probesEnabled,omitempty"`
	// DebugLogging turns flagd's debug logging on or off.
	// +optional
	DebugLogging *bool `json:"debugLogging,omitempty"`
	// EnvVars are env vars of the sidecar and the application.
	// +optional
	// +listType=map
	// +listMapKey=name
	EnvVars []corev1.EnvVar `json:"envVars,omitempty"`
	// Resources are the sidecar's resources, per resource name.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ContextValues are static evaluation context values.
	// +optional
	ContextValues map[string]string `json:"contextValues,omitempty"`
	// HeaderToContextMappings map request headers to context keys.
	// +optional
	HeaderToContextMappings map[string]string `json:"headerToContextMappings,omitempty"`
}

// FeatureFlagSourcePolicyStatus is the observed state of a FeatureFlagSourcePolicy.
type FeatureFlagSourcePolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted and Enforced (see the package doc).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Sidecars is the number of workloads and Flagds whose flagd it governs.
	// +optional
	Sidecars int32 `json:"sidecars,omitempty"`
}

// FeatureFlagSourcePolicy sets namespace-wide defaults and overrides for the
// sidecar settings of FeatureFlagSources.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ffsp
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Sidecars",type=integer,JSONPath=`.status.sidecars`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FeatureFlagSourcePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FeatureFlagSourcePolicySpec `json:"spec,omitempty"`
	// Status is defaulted to observedGeneration 0 until flagplane writes
	// it, so that kstatus tells a new object (InProgress: generation 1 not
	// observed yet) from a delivered one.
	// +kubebuilder:default={observedGeneration: 0}
	Status FeatureFlagSourcePolicyStatus `json:"status,omitempty"`
}

// FeatureFlagSourcePolicyList is a list of FeatureFlagSourcePolicy.
//
// +kubebuilder:object:root=true
type FeatureFlagSourcePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureFlagSourcePolicy `json:"items"`
}
