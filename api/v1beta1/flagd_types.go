package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FlagdSpec is the desired state of a Flagd: a standalone flagd Deployment
// serving a FeatureFlagSource's flags behind a Service, optionally exposed
// by an Ingress or a Gateway API HTTPRoute.
//
// Every field, default and JSON name is the OpenFeature Operator's. Two
// things are more lenient: ingress.hosts and gatewayApiRoutes.parentRefs
// may be left out (no hosts: one rule for every host), and
// featureFlagSource may name a source of another namespace as
// `namespace/name` (followed when a ReferenceGrant there permits kind Flagd).
// flagplane adds labels and annotations for the generated objects.
// +kubebuilder:validation:XValidation:rule="!has(self.labels) || !self.labels.exists(k, k in ['app', 'app.kubernetes.io/name', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/version'])",message="labels must not set app, app.kubernetes.io/name, app.kubernetes.io/managed-by or app.kubernetes.io/version: flagplane sets them"
type FlagdSpec struct {
	// Replicas is the number of flagd replicas.
	// +optional
	// +kubebuilder:default=1
	Replicas *int32 `json:"replicas,omitempty"`

	// ServiceType is the type of the Service in front of flagd.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum:=ClusterIP;NodePort;LoadBalancer;ExternalName
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// ServiceAccountName is the service account of the flagd pods; the
	// namespace's default one when empty. With the kubernetes provider,
	// flagplane lets this account read the flag sets (a Role and
	// RoleBinding in the flag set's namespace).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// FeatureFlagSource is the source whose settings and flag sources flagd
	// runs with: `name` in the Flagd's namespace, or `namespace/name`
	// (followed only when a ReferenceGrant in that namespace permits kind
	// Flagd of this namespace to refer to it).
	FeatureFlagSource string `json:"featureFlagSource"`

	// Ingress exposes flagd's APIs through an Ingress.
	// +optional
	Ingress IngressSpec `json:"ingress,omitzero"`

	// GatewayApiRoutes exposes flagd's APIs through a Gateway API HTTPRoute
	// (once Gateway API's CRDs are installed).
	// +optional
	GatewayApiRoutes GatewayApiSpec `json:"gatewayApiRoutes,omitzero"` //nolint:revive // After its JSON name, fixed by the OpenFeature API.

	// Labels are put on every object generated for this Flagd (the
	// Deployment and its pods, the Service, the Ingress, the HTTPRoute), in
	// addition to the operator's --labels and to the labels flagplane sets
	// itself, which they cannot replace. A GitOps tool's tracking keys
	// (app.kubernetes.io/instance, argocd.argoproj.io/*,
	// kustomize.toolkit.fluxcd.io/*, helm.toolkit.fluxcd.io/*) are left
	// out: Argo CD or Flux would take the generated objects for theirs and
	// prune them. New in flagplane.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are put on every object generated for this Flagd, like
	// Labels, without a GitOps tool's tracking keys. New in flagplane.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// IngressSpec configures the Ingress in front of flagd.
type IngressSpec struct {
	// Enabled creates the Ingress.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Annotations of the Ingress.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Hosts get one rule each; an empty string is a rule without host. No
	// hosts: one rule without host.
	// +optional
	Hosts []string `json:"hosts,omitempty"`

	// TLS of the Ingress.
	// +optional
	TLS []networkingv1.IngressTLS `json:"tls,omitempty"`

	// IngressClassName is the Ingress's class.
	// +optional
	IngressClassName *string `json:"ingressClassName,omitempty"`

	// PathType of the rules' paths; Prefix when empty.
	// +optional
	PathType networkingv1.PathType `json:"pathType,omitempty"`

	// FlagdPath routes to flagd's evaluation API; /flagd.evaluation.v1.Service when empty.
	// +optional
	FlagdPath string `json:"flagdPath,omitempty"`

	// OFREPPath routes to flagd's OFREP API; /ofrep when empty.
	// +optional
	OFREPPath string `json:"ofrepPath,omitempty"`

	// SyncPath routes to flagd's sync API; /flagd.sync.v1.Service when empty.
	// +optional
	SyncPath string `json:"syncPath,omitempty"`
}

// GatewayApiSpec configures the Gateway API HTTPRoute in front of flagd.
type GatewayApiSpec struct { //nolint:revive // Named after gatewayApiRoutes, whose JSON name the OpenFeature API fixes.
	// Enabled creates the HTTPRoute.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Annotations of the HTTPRoute.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Hosts are the HTTPRoute's hostnames.
	// +optional
	Hosts []string `json:"hosts,omitempty"`

	// ParentRefs are the Gateways (usually) the HTTPRoute attaches to.
	// +optional
	ParentRefs []gatewayapiv1.ParentReference `json:"parentRefs,omitempty"`
}

// FlagdStatus is the observed state of a Flagd.
type FlagdStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted (the spec is valid), ResolvedRefs (the
	// FeatureFlagSource exists and may be used), Programmed (every generated
	// object is in place), Available (a flagd pod is ready),
	// FlagdVersionSupported (flagplane vouches for the flagd release the
	// Deployment runs, which takes everything the source asks for). See the
	// package documentation for the whole contract.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Replicas is the number of flagd pods, ReadyReplicas the number of them
	// that are ready, as the Deployment reports them.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Endpoints are where flagd's APIs are served: the Service's ports, and
	// the Ingress's and HTTPRoute's hosts and paths.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Endpoints []FlagdEndpoint `json:"endpoints,omitempty"`
}

// FlagdEndpoint is one place where one of flagd's APIs is served.
type FlagdEndpoint struct {
	// API is flagd's evaluation API (flagd: gRPC, and HTTP/JSON on the same
	// port), ofrep, sync, or management (health and metrics).
	API string `json:"api"`
	// Kind is what serves it: Service, Ingress or HTTPRoute.
	Kind string `json:"kind"`
	// Host is the Service's DNS name in the cluster, or the host of an
	// Ingress rule or HTTPRoute hostname ("" for every host).
	// +optional
	Host string `json:"host,omitempty"`
	// Port is the Service's port.
	// +optional
	Port int32 `json:"port,omitempty"`
	// Path is the Ingress's or HTTPRoute's path.
	// +optional
	Path string `json:"path,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.featureFlagSource`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Flagd runs flagd as a Deployment of its own behind a Service, with the
// settings and flag sources of a FeatureFlagSource, for applications that
// call flagd over the network (RPC, OFREP) rather than through a sidecar.
type Flagd struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FlagdSpec `json:"spec,omitempty"`
	// Status is defaulted to observedGeneration 0 until flagplane writes
	// it, so that kstatus tells a new object (InProgress: generation 1 not
	// observed yet) from a delivered one.
	// +kubebuilder:default={observedGeneration: 0}
	Status FlagdStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FlagdList is a list of Flagd.
type FlagdList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Flagd `json:"items"`
}
