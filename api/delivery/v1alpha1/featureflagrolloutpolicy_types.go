package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FeatureFlagRolloutPolicySpec is the desired state of a FeatureFlagRolloutPolicy.
// +kubebuilder:validation:XValidation:rule="self.targetRef == oldSelf.targetRef",message="targetRef cannot change: the status describes that flag set's rollout; create another policy for another FeatureFlag"
// +kubebuilder:validation:XValidation:rule="self.steps.all(s, has(s.clusterSelector)) || self.steps.all(s, !has(s.clusterSelector))",message="either every step selects clusters (a fleet hub's policy) or none does"
type FeatureFlagRolloutPolicySpec struct {
	// TargetRef is the FeatureFlag whose edits the policy stages, in the
	// policy's namespace.
	TargetRef FlagSetTargetReference `json:"targetRef"`

	// Steps deliver a new revision to more and more consumers: step N's
	// consumers are those it selects and those of every step before it.
	// After the last step every consumer gets the revision.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Steps []RolloutStep `json:"steps"`

	// Gates are checked on the consumers that serve the new revision while
	// the rollout runs; one that fails halts it and returns every consumer
	// to the stable revision.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=type
	Gates []Gate `json:"gates,omitempty"`

	// Paused holds the rollout at its current step: no step starts until
	// it is false again. Consumers keep what they serve.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// FlagSetTargetReference names the FeatureFlag a policy attaches to, as
// Gateway API's LocalPolicyTargetReference does.
type FlagSetTargetReference struct {
	// Group is core.openfeature.dev.
	// +kubebuilder:validation:Enum=core.openfeature.dev
	Group string `json:"group"`
	// Kind is FeatureFlag.
	// +kubebuilder:validation:Enum=FeatureFlag
	Kind string `json:"kind"`
	// Name is the FeatureFlag's name, in the policy's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RolloutStep adds consumers to a rollout and says how long they serve the
// new revision before the next step starts.
// +kubebuilder:validation:XValidation:rule="[has(self.namespaceSelector), has(self.workloadSelector), has(self.percentage), has(self.clusterSelector)].filter(x, x).size() == 1",message="a step selects consumers with exactly one of namespaceSelector, workloadSelector, percentage and clusterSelector"
type RolloutStep struct {
	// Name names the step in status and in the CLI.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// NamespaceSelector selects the consumers of the namespaces whose
	// labels it matches.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// WorkloadSelector selects the consumers of the namespaces where one
	// of the flag set's consuming workloads has labels it matches (a
	// namespace's workloads share its copy of the flag set).
	// +optional
	WorkloadSelector *metav1.LabelSelector `json:"workloadSelector,omitempty"`

	// Percentage selects this share of the consumers, rounded up, in a
	// stable order of a hash of their namespace.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percentage *int32 `json:"percentage,omitempty"`

	// ClusterSelector selects member clusters by their ClusterProfile's
	// labels: a fleet hub stages an edit cluster by cluster. A policy's
	// steps either all select clusters (on a fleet hub) or none do; a
	// member's flagplane does not accept a policy of cluster steps.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// Pause is how long the step's consumers serve the new revision, with
	// every gate holding, before the next step starts.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h30m (units h, m, s, ms, us, ns), not negative"
	Pause *metav1.Duration `json:"pause,omitempty"`

	// Approval makes the step wait, after its pause, until someone
	// promotes it (flagplane rollout promote).
	// +optional
	Approval bool `json:"approval,omitempty"`
}

// GateType is a health gate flagplane checks.
// +kubebuilder:validation:Enum=PodsReady;Restarts;EvaluationErrors;Prometheus;Confirmed
type GateType string

// Gate types.
const (
	// GatePodsReady fails when a pod of a workload that serves the new
	// revision is not Ready for longer than the gate's For.
	GatePodsReady GateType = "PodsReady"
	// GateRestarts fails when the containers of the pods that serve the new
	// revision restarted more than Max times since the rollout reached them.
	GateRestarts GateType = "Restarts"
	// GateEvaluationErrors fails when the flagd sidecars of the pods that
	// serve the new revision counted more than Max evaluation errors since
	// the rollout reached them (flagd's impressions metric, reason ERROR,
	// read from its management port).
	GateEvaluationErrors GateType = "EvaluationErrors"
	// GatePrometheus fails when a Prometheus query's value is more than Max.
	GatePrometheus GateType = "Prometheus"
	// GateConfirmed, on a fleet hub, fails when a cluster of a started
	// step does not confirm the new revision (its copy's status, as the
	// member's flagplane writes it) within the gate's For of the step's
	// start. A cluster the hub cannot reach does not confirm.
	GateConfirmed GateType = "Confirmed"
)

// Gate is a health check of the consumers that serve the new revision.
// +kubebuilder:validation:XValidation:rule="self.type != 'Prometheus' || has(self.prometheus)",message="a Prometheus gate needs prometheus (address and query)"
// +kubebuilder:validation:XValidation:rule="self.type == 'Prometheus' || !has(self.prometheus)",message="prometheus is only for a gate of type Prometheus"
type Gate struct {
	// Type is the check.
	Type GateType `json:"type"`

	// Max is the most restarts (Restarts), evaluation errors
	// (EvaluationErrors) or the largest value (Prometheus) that passes.
	// Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Max *int64 `json:"max,omitempty"`

	// For is how long a pod may stay not Ready before PodsReady fails.
	// Default 0s: at once.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h30m (units h, m, s, ms, us, ns), not negative"
	For *metav1.Duration `json:"for,omitempty"`

	// Prometheus is the query of a Prometheus gate.
	// +optional
	Prometheus *PrometheusGate `json:"prometheus,omitempty"`
}

// PrometheusGate is a query that a Prometheus gate evaluates.
type PrometheusGate struct {
	// Address is the Prometheus HTTP API's base URL.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +kubebuilder:validation:MaxLength=2048
	Address string `json:"address"`
	// Query is a PromQL expression giving one number; $namespaces is
	// replaced by a regular expression of the namespaces that serve the
	// new revision.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
}

// RolloutPhase is where a rollout stands.
type RolloutPhase string

// Rollout phases.
const (
	// PhaseProgressing: a step is being delivered or waits out its pause.
	PhaseProgressing RolloutPhase = "Progressing"
	// PhasePaused: spec.paused, or a step waits for approval.
	PhasePaused RolloutPhase = "Paused"
	// PhaseHalted: a gate failed; every consumer serves the stable revision.
	PhaseHalted RolloutPhase = "Halted"
	// PhaseAborted: someone aborted; every consumer serves the stable revision.
	PhaseAborted RolloutPhase = "Aborted"
	// PhaseCompleted: every consumer serves the revision.
	PhaseCompleted RolloutPhase = "Completed"
)

// FeatureFlagRolloutPolicyStatus is the observed state of a FeatureFlagRolloutPolicy.
type FeatureFlagRolloutPolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted, Progressing, Staged, and the summary
	// conditions Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// StableRevision is the revision every consumer returns to when the
	// rollout halts or is aborted: the last one that completed.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`
	// TargetRevision is the revision being rolled out.
	// +optional
	TargetRevision string `json:"targetRevision,omitempty"`
	// Phase is where the rollout of TargetRevision stands.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Rollout numbers the rollouts of this policy: every new plan (an edit
	// of the flag set) takes the next number. Promotions and aborts name
	// it (PromoteValue, AbortValue), so that one meant for a rollout acts
	// on that rollout once, never on a later one of the same revision.
	// +optional
	Rollout int64 `json:"rollout,omitempty"`
	// ReplacedRevision is the revision the current plan replaced while it
	// was still rolling out: an edit made during a rollout starts a new
	// plan from the stable revision, and this says which target it
	// dropped ("" when the previous rollout had ended).
	// +optional
	ReplacedRevision string `json:"replacedRevision,omitempty"`
	// Step is the index of the step being delivered; len(spec.steps) once
	// completed.
	// +optional
	Step int32 `json:"step"`
	// StepStartedAt is when the current step started.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`
	// StepServedAt is when every consumer of the current step first served
	// TargetRevision: its pause counts from then.
	// +optional
	StepServedAt *metav1.Time `json:"stepServedAt,omitempty"`
	// Approved is the step that was promoted last (-1: none).
	// +optional
	Approved int32 `json:"approved"`
	// Message says what the rollout waits for, why it halted, or which
	// revision an edit replaced.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`

	// Steps lists, per step, the consumers it selects and the revision each
	// one serves.
	// +optional
	// +kubebuilder:validation:MaxItems=17
	Steps []StepStatus `json:"steps,omitempty"`

	// Unstaged lists the workloads and Flagds that read the FeatureFlag
	// themselves (provider kubernetes), which no rollout can stage, at most
	// 32: they get every edit at once, while the other consumers follow
	// the plan (condition Staged is False while there are any).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Unstaged []string `json:"unstaged,omitempty"`
}

// StepStatus is the consumers of one step.
type StepStatus struct {
	// Name is the step's name, or "step-<index>"; the rest of the consumers
	// (after the last step) are "rest".
	Name string `json:"name"`
	// Consumers are the namespaces the step adds, each with the revision it
	// is planned to serve and the one it serves.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Consumers []ConsumerStatus `json:"consumers,omitempty"`
	// Clusters are the member clusters the step adds, on a fleet hub.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Clusters []ClusterRevision `json:"clusters,omitempty"`
	// More is how many consumers the list leaves out.
	// +optional
	More int32 `json:"more,omitempty"`
}

// ClusterRevision is one member cluster of a fleet hub's rollout.
type ClusterRevision struct {
	// Cluster is the ClusterProfile's name.
	Cluster string `json:"cluster"`
	// Planned is the revision the plan gives it now.
	Planned string `json:"planned"`
	// Serving is the revision the member confirms ("" when not known).
	// +optional
	Serving string `json:"serving,omitempty"`
}

// ConsumerStatus is one consumer of a rollout: a namespace's copy of the
// flag set.
type ConsumerStatus struct {
	// Namespace is the consumer's namespace.
	Namespace string `json:"namespace"`
	// Workloads is how many of the flag set's consuming workloads and
	// Flagds the namespace has.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`
	// Planned is the revision the plan gives it now.
	Planned string `json:"planned"`
	// Serving is the revision its ConfigMap holds or its streams were sent
	// ("" when not known yet).
	// +optional
	Serving string `json:"serving,omitempty"`
}

// FeatureFlagRolloutPolicy stages the delivery of a FeatureFlag's edits to
// its consumers, with pauses, approvals and health gates.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ffrp
// +kubebuilder:printcolumn:name="Flag set",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.status.step`
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stableRevision`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.targetRevision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FeatureFlagRolloutPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FeatureFlagRolloutPolicySpec `json:"spec,omitempty"`
	// Status is defaulted to observedGeneration 0 until flagplane writes
	// it, so that kstatus tells a new object from a reconciled one.
	// +kubebuilder:default={observedGeneration: 0}
	Status FeatureFlagRolloutPolicyStatus `json:"status,omitempty"`
}

// FeatureFlagRolloutPolicyList is a list of FeatureFlagRolloutPolicy.
//
// +kubebuilder:object:root=true
type FeatureFlagRolloutPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FeatureFlagRolloutPolicy `json:"items"`
}

// Condition types and reasons of a FeatureFlagRolloutPolicy.
const (
	ConditionAccepted    = "Accepted"
	ConditionProgressing = "Progressing"
	// ConditionStaged is True when the plan stages every consumer, False
	// (reason UnstageableConsumers) while some read the FeatureFlag
	// themselves.
	ConditionStaged      = "Staged"
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"

	ReasonAccepted             = "Accepted"
	ReasonAllStaged            = "AllStaged"
	ReasonUnsupportedGate      = "UnsupportedGate"
	ReasonPolicyChanged        = "PolicyChanged"
	ReasonTargetNotFound       = "TargetNotFound"
	ReasonConflicted           = "Conflicted"
	ReasonUnstageableConsumers = "UnstageableConsumers"
	ReasonStepProgressing      = "StepProgressing"
	ReasonAwaitingApproval     = "AwaitingApproval"
	ReasonPaused               = "Paused"
	ReasonGateFailed           = "GateFailed"
	ReasonAborted              = "Aborted"
	ReasonCompleted            = "Completed"
	// ReasonClusterSteps: a member's flagplane was given a policy whose
	// steps select clusters, which only a fleet hub stages.
	ReasonClusterSteps = "ClusterSteps"
)
