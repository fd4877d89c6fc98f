package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InProcessConfigurationSpec is the desired state of an
// InProcessConfiguration: the env vars that point an in-process flagd
// provider at its sync source.
type InProcessConfigurationSpec struct {
	// Port of the sync source.
	// +optional
	// +kubebuilder:default:=8015
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// SocketPath of the sync source, instead of host and port.
	// +optional
	SocketPath string `json:"socketPath,omitempty"`

	// Host of the sync source.
	// +optional
	// +kubebuilder:default:="localhost"
	Host string `json:"host,omitempty"`

	// TLS to the sync source.
	// +optional
	// +kubebuilder:default:=false
	TLS bool `json:"tls,omitempty"`

	// OfflineFlagSourcePath makes the provider read flags from this file.
	// +optional
	OfflineFlagSourcePath string `json:"offlineFlagSourcePath,omitempty"`

	// Selector is the flag set selector sent to the sync source.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Cache of evaluation results: lru or disabled.
	// +optional
	// +kubebuilder:default:="lru"
	// +kubebuilder:validation:Pattern="^(lru|disabled)$"
	// +kubebuilder:validation:Type=string
	Cache string `json:"cache,omitempty"`

	// CacheMaxSize is the size of the lru cache.
	// +optional
	// +kubebuilder:default:=1000
	// +kubebuilder:validation:Minimum=0
	CacheMaxSize int `json:"cacheMaxSize,omitempty"`

	// EnvVars are set on the app containers, each name prefixed with EnvVarPrefix.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	EnvVars []corev1.EnvVar `json:"envVars,omitempty"`

	// EnvVarPrefix prefixes every env var set from this configuration.
	// +optional
	// +kubebuilder:default:="FLAGD"
	EnvVarPrefix string `json:"envVarPrefix,omitempty"`
}

// InProcessConfigurationStatus is the observed state of an InProcessConfiguration.
type InProcessConfigurationStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TargetCount is the number of workloads that use this configuration.
	// +optional
	TargetCount int32 `json:"targetCount,omitempty"`

	// Targets lists the workloads that use this configuration, capped at 256.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Targets []WorkloadReference `json:"targets,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetCount`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// InProcessConfiguration configures in-process flagd providers through env vars.
type InProcessConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec InProcessConfigurationSpec `json:"spec,omitempty"`
	// Status is defaulted to observedGeneration 0 until flagplane writes
	// it, so that kstatus tells a new object (InProgress: generation 1 not
	// observed yet) from a delivered one.
	// +kubebuilder:default={observedGeneration: 0}
	Status InProcessConfigurationStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// InProcessConfigurationList is a list of InProcessConfiguration.
type InProcessConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InProcessConfiguration `json:"items"`
}
