package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "delivery.flagplane.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kinds of this group.
const (
	FeatureFlagRevisionKind      = "FeatureFlagRevision"
	FeatureFlagRolloutPolicyKind = "FeatureFlagRolloutPolicy"
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&FeatureFlagRevision{}, &FeatureFlagRevisionList{},
		&FeatureFlagRolloutPolicy{}, &FeatureFlagRolloutPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Labels and annotations of the group.
const (
	// FlagSetLabel is on every FeatureFlagRevision: the name of its
	// FeatureFlag, in the same namespace, so that a flag set's history is
	// one label selection.
	FlagSetLabel = "delivery.flagplane.dev/flag-set"

	// ChangeCauseAnnotation on a FeatureFlag says why its spec changed, as
	// kubernetes.io/change-cause does for a Deployment; the revision that
	// records the spec keeps it.
	ChangeCauseAnnotation = "delivery.flagplane.dev/change-cause"

	// SpecAuthorAnnotation on a FeatureFlag is the user who last changed
	// its spec, as the API server authenticated them: flagplane's mutating
	// webhook sets it to the request's userInfo.username when a write
	// creates the FeatureFlag or changes its spec, and puts the old value
	// back on any other write, so that it cannot be written by hand. The
	// revision that records the spec keeps it as spec.createdBy.
	SpecAuthorAnnotation = "delivery.flagplane.dev/spec-author"

	// RevisionHistoryLimitAnnotation on a FeatureFlag is how many revisions
	// of it flagplane keeps (default: the manager's
	// --revision-history-limit). The revision the flag set serves and the
	// ones a rollout plan names are kept whatever the limit.
	RevisionHistoryLimitAnnotation = "delivery.flagplane.dev/revision-history-limit"

	// PromoteAnnotation on a FeatureFlagRolloutPolicy asks to end the
	// current step's wait: its value names the rollout and the step
	// (PromoteValue), so that a promotion meant for one step of one
	// rollout never passes another (flagplane rollout promote writes it).
	PromoteAnnotation = "delivery.flagplane.dev/promote"
	// AbortAnnotation on a FeatureFlagRolloutPolicy asks to abort the
	// rollout it names (AbortValue): every consumer returns to the stable
	// revision (flagplane rollout abort writes it).
	AbortAnnotation = "delivery.flagplane.dev/abort"
)

// The condition of a FeatureFlag's status about its history.
const (
	// ConditionRevisionRecorded is on a FeatureFlag only while the spec
	// flagplane accepted and serves is not recorded as a revision, with
	// status False; it is removed once it is. Serving does not depend on
	// it: the FeatureFlag's consumers get the spec all the same, and its
	// Ready condition does not count it.
	ConditionRevisionRecorded = "RevisionRecorded"
	// ReasonNamespaceRevisionLimit: the namespace holds the manager's
	// --revision-namespace-limit of FeatureFlagRevisions.
	ReasonNamespaceRevisionLimit = "NamespaceRevisionLimit"
	// ReasonRevisionRefused: the API server refused to create the
	// revision (a ResourceQuota of the namespace, a policy, its size); the
	// message is the API server's.
	ReasonRevisionRefused = "RevisionRefused"
)

// PromoteValue is the PromoteAnnotation that promotes step (from 0) of the
// rollout a status describes: "<target revision>/<rollout>/<step>".
func PromoteValue(st FeatureFlagRolloutPolicyStatus, step int32) string {
	return fmt.Sprintf("%s/%d/%d", st.TargetRevision, st.Rollout, step)
}

// AbortValue is the AbortAnnotation that aborts the rollout a status
// describes: "<target revision>/<rollout>".
func AbortValue(st FeatureFlagRolloutPolicyStatus) string {
	return fmt.Sprintf("%s/%d", st.TargetRevision, st.Rollout)
}
