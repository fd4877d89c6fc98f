package workflows

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event reasons flagplane reports. Events go out when something turns bad
// (a transition), not on every retry, so that they stay readable.
const (
	EventInvalidFlagSet = "InvalidFlagSet"
	EventInvalidSource  = "InvalidSource"
	EventInvalidPolicy  = "InvalidPolicy"
	EventUnresolvedRefs = "UnresolvedRefs"
	EventApplyFailed    = "ApplyFailed"
	EventRestarted      = "Restarted"
	// EventReferrersDenied: workloads of another namespace name a source or
	// an in-process configuration without a ReferenceGrant.
	EventReferrersDenied = "ReferrersDenied"
	// EventUnresolvedAnnotation: a workload's annotation names a source or an
	// in-process configuration that does not exist or may not be used.
	EventUnresolvedAnnotation = "UnresolvedAnnotation"
)

// Actions of the events (events.k8s.io/v1 requires one).
const (
	actionValidate = "Validate"
	actionResolve  = "Resolve"
	actionApply    = "Apply"
	actionRollout  = "Rollout"
)

// recorder sends events when one is configured; tests and offline tools run without.
type recorder struct{ events.EventRecorder }

func (r recorder) warn(regarding runtime.Object, reason, action, note string, args ...any) {
	if r.EventRecorder != nil {
		r.Eventf(regarding, nil, corev1.EventTypeWarning, reason, action, note, args...)
	}
}

func (r recorder) normal(regarding runtime.Object, reason, action, note string, args ...any) {
	if r.EventRecorder != nil {
		r.Eventf(regarding, nil, corev1.EventTypeNormal, reason, action, note, args...)
	}
}
