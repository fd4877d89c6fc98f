package v1beta1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FeatureFlagSpec is the desired state of a FeatureFlag.
type FeatureFlagSpec struct {
	// FlagSpec is the flag set in flagd's flag definition format.
	// +optional
	FlagSpec FlagSpec `json:"flagSpec,omitempty"`
}

// FlagSpec is a flagd flag definition document: the flags, shared evaluators
// and flag-set metadata.
type FlagSpec struct {
	// Flags maps each flag key to its definition.
	Flags map[string]Flag `json:"flags"`

	// Evaluators holds shared targeting rules that flags reference with $ref.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Evaluators json.RawMessage `json:"$evaluators,omitempty"`

	// Metadata is flag-set level metadata that flags inherit in flagd.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Flag is one flag of a flag set.
type Flag struct {
	// State is ENABLED or DISABLED.
	// +kubebuilder:validation:Enum=ENABLED;DISABLED
	State string `json:"state"`

	// Variants maps each variant name to its value. All values of one flag
	// share a type (boolean, string, number or object).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Variants json.RawMessage `json:"variants"`

	// DefaultVariant names the variant served when targeting does not pick one.
	DefaultVariant string `json:"defaultVariant"`

	// Targeting is a JSONLogic rule that picks a variant from the evaluation context.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Targeting json.RawMessage `json:"targeting,omitempty"`

	// Metadata is per-flag metadata, merged over the flag set's metadata.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Flag states.
const (
	FlagStateEnabled  = "ENABLED"
	FlagStateDisabled = "DISABLED"
)

// FeatureFlagStatus is the observed state of a FeatureFlag.
type FeatureFlagStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted tells whether the flag set is valid and served.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Flags is the number of flags in the set.
	// +optional
	Flags int32 `json:"flags,omitempty"`

	// Sources is the number of sources that reference this flag set.
	// +optional
	Sources int32 `json:"sources,omitempty"`

	// Namespaces lists the namespaces whose workloads consume this flag set.
	// +optional
	// +listType=set
	Namespaces []string `json:"namespaces,omitempty"`

	// Revision is the content hash of the flag set as flagplane serves it:
	// the content its generated ConfigMaps hold, and the sync server sends,
	// once they are up to date.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Delivered is "<up to date>/<all>" over the consumers whose revision
	// flagplane observes (Consumers): the generated ConfigMaps of the flag
	// set (the file provider's copies, in every consuming namespace), and,
	// per namespace, the streams of the built-in sync server (the
	// flagd-proxy provider), up to date when every stream of the namespace
	// was sent Revision. Not counted, because nothing tells flagplane which
	// revision they hold: what flagd reads itself from the API server (the
	// kubernetes provider, see Unobserved), and the delay with which the
	// kubelet projects a ConfigMap into a pod's volume.
	// +optional
	Delivered string `json:"delivered,omitempty"`

	// Consumers lists the consumers whose revision flagplane observes, and
	// the revision each holds, those behind first, at most 32: every
	// generated ConfigMap (kind ConfigMap), and the sync server's streams of
	// each subscriber namespace (kind SyncSubscribers).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Consumers []ConsumerRevision `json:"consumers,omitempty"`

	// Unobserved counts the consumers of the flag set whose revision
	// flagplane cannot observe, so that Delivered is not read as covering
	// them.
	// +optional
	Unobserved *UnobservedConsumers `json:"unobserved,omitempty"`

	// Confirmed is "<confirmed>/<pods>" over the pods whose flagd flagplane
	// asks what it serves: the pods of the workloads that read the flag set
	// through an injected flagd sidecar (the file and flagd-proxy
	// providers), and the pods of Flagds that serve it. A pod is confirmed
	// when its flagd answers that it serves the revision planned for it
	// (Revision, or what a staged rollout gives its namespace), read after
	// its copy got that revision. Ready waits for it.
	// +optional
	Confirmed string `json:"confirmed,omitempty"`

	// Serving tells, per consuming namespace, how many pods serve which
	// revision, as their flagd answers: namespaces with pods not confirmed
	// first, at most 32.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Serving []NamespaceServing `json:"serving,omitempty"`
}

// NamespaceServing is what the pods of one namespace that read a flag set
// serve of it, as their flagd answers.
type NamespaceServing struct {
	// Namespace of the pods.
	Namespace string `json:"namespace"`
	// Revision planned for them.
	Revision string `json:"revision,omitempty"`
	// Pods is how many pods read the flag set there; Confirmed, how many
	// answer with Revision.
	Pods      int32 `json:"pods"`
	Confirmed int32 `json:"confirmed"`
	// Starting counts the pods that have no IP yet, not in Pods: they
	// serve nothing yet, and read the copy as it is when they start.
	// +optional
	Starting int32 `json:"starting,omitempty"`
	// NotAsked counts the pods of the readers that flagplane does not
	// ask, not in Pods: pods without the flagd sidecar (they serve none of
	// the flag set; the source's status and the healer see to them), and
	// pods on the host's network. Reason says why when no pod of Pods is
	// behind.
	// +optional
	NotAsked int32 `json:"notAsked,omitempty"`
	// Others counts the pods not confirmed by what their flagd answers
	// (another revision, or "" when it did not answer yet, could not be
	// asked, or its read failed), at most 8 revisions.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Others []RevisionPods `json:"others,omitempty"`
	// Since is when the namespace's copy of the flag set got Revision:
	// the bound after which a pod not confirmed is reported counts from it.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Reason says why the first pod not confirmed is not, with the
	// evidence: what its flagd answered, or why it could not be asked.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RevisionPods is how many pods serve one revision of a flag set.
type RevisionPods struct {
	// Revision served ("" when unknown).
	Revision string `json:"revision,omitempty"`
	Pods     int32  `json:"pods"`
}

// ConsumerRevision is the revision of a flag set that one consumer holds.
type ConsumerRevision struct {
	// Kind of the consumer: ConfigMap (a generated ConfigMap), or
	// SyncSubscribers (the sync server's streams of the flag set to the
	// subscribers of one namespace, over every replica of flagplane).
	Kind string `json:"kind"`
	// Namespace of the consumer.
	Namespace string `json:"namespace"`
	// Name of the consumer: the ConfigMap's; for SyncSubscribers, the
	// selector the subscribers stream (core.openfeature.dev/<namespace>/<name>).
	Name string `json:"name"`
	// Revision it holds ("" when it does not exist yet, or no content was
	// sent yet). For SyncSubscribers: Revision when every stream was sent
	// it, else the revision of the streams furthest behind.
	Revision string `json:"revision,omitempty"`
	// Since is when it got that revision (for SyncSubscribers, when the
	// sync server sent it), or when flagplane first saw it hold it.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Streams is, for SyncSubscribers, the number of open streams.
	// +optional
	Streams int32 `json:"streams,omitempty"`
	// Current is, for SyncSubscribers, how many of the streams were sent
	// the flag set's Revision.
	// +optional
	Current int32 `json:"current,omitempty"`
}

// UnobservedConsumers are the consumers of a flag set whose revision
// flagplane cannot observe.
type UnobservedConsumers struct {
	// Workloads is the number of workloads that read the flag set with the
	// kubernetes provider.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`
	// Flagds is the number of Flagds that read it with the kubernetes provider.
	// +optional
	Flagds int32 `json:"flagds,omitempty"`
	// InProcess is the number of workloads whose in-process SDKs read it:
	// an InProcessConfiguration whose selector names the flag set applies
	// to them. flagplane asks no SDK which revision it holds; for those
	// subscribed to flagplane's sync server, consumers says what the server
	// sent them.
	// +optional
	InProcess int32 `json:"inProcess,omitempty"`
	// Reason says why their revision is not known.
	Reason string `json:"reason"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=ff
// +kubebuilder:printcolumn:name="Flags",type=integer,JSONPath=`.status.flags`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Delivered",type=string,JSONPath=`.status.delivered`
// +kubebuilder:printcolumn:name="Confirmed",type=string,JSONPath=`.status.confirmed`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FeatureFlag is a flag set in flagd's format.
type FeatureFlag struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FeatureFlagSpec `json:"spec,omitempty"`
	// Status is defaulted to observedGeneration 0 until flagplane writes
	// it, so that kstatus tells a new object (InProgress: generation 1 not
	// observed yet) from a delivered one.
	// +kubebuilder:default={observedGeneration: 0}
	Status FeatureFlagStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FeatureFlagList is a list of FeatureFlag.
type FeatureFlagList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureFlag `json:"items"`
}
