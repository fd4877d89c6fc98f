package workflows

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
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
	// EventInvalidFlagd: a Flagd's spec cannot be generated.
	EventInvalidFlagd = "InvalidFlagd"
	// EventUnsupportedFlagdVersion: the flagd release injected for a source
	// or run by a Flagd is not one flagplane vouches for, or cannot take a
	// setting of it (its FlagdVersionSupported condition turned False).
	EventUnsupportedFlagdVersion = "UnsupportedFlagdVersion"
)

// Actions of the events (events.k8s.io/v1 requires one).
const (
	ActionValidate = "Validate"
	ActionResolve  = "Resolve"
	ActionApply    = "Apply"
	ActionRollout  = "Rollout"
	ActionConfirm  = "Confirm"
)

// Warn sends a Warning event through recorder, when one is configured
// (tests and offline tools run without).
func Warn(recorder events.EventRecorder, regarding runtime.Object, reason, action, note string, args ...any) {
	if recorder != nil {
		recorder.Eventf(regarding, nil, corev1.EventTypeWarning, reason, action, "%s", fitNote(note, args...))
	}
}

// Normal sends a Normal event through recorder, when one is configured.
func Normal(recorder events.EventRecorder, regarding runtime.Object, reason, action, note string, args ...any) {
	if recorder != nil {
		recorder.Eventf(regarding, nil, corev1.EventTypeNormal, reason, action, "%s", fitNote(note, args...))
	}
}

// NoteMaxLength is the most bytes an Event's note may hold: the API server
// refuses a longer one (events.k8s.io/v1), and the Event is lost. Notes
// that name objects of the longest names, or carry an API error that names
// them again, can pass it.
const NoteMaxLength = 1024

// fitNote formats an Event's note and cuts it, at a character, to
// NoteMaxLength bytes ending in "…".
func fitNote(note string, args ...any) string {
	s := fmt.Sprintf(note, args...)
	if len(s) <= NoteMaxLength {
		return s
	}
	const more = "…"
	return prefixOf(s, NoteMaxLength-len(more)) + more
}

// WorkloadEventTarget is the object an Event about a workload is attached
// to: the workload as the cache holds it, else a reference to it.
func WorkloadEventTarget(ctx context.Context, c client.Reader, k topology.Key) runtime.Object {
	if obj, err := newWorkloadObject(k); err == nil && c.Get(ctx, client.ObjectKeyFromObject(obj), obj) == nil {
		return obj
	}
	return &corev1.ObjectReference{APIVersion: "apps/v1", Kind: string(k.Kind), Namespace: k.Namespace, Name: k.Name}
}

// newWorkloadObject returns an empty object of a workload's kind, named.
func newWorkloadObject(k topology.Key) (client.Object, error) {
	var obj client.Object
	switch k.Kind {
	case topology.KindDeployment:
		obj = &appsv1.Deployment{}
	case topology.KindStatefulSet:
		obj = &appsv1.StatefulSet{}
	case topology.KindDaemonSet:
		obj = &appsv1.DaemonSet{}
	default:
		return nil, fmt.Errorf("%s is not a workload", k)
	}
	obj.SetNamespace(k.Namespace)
	obj.SetName(k.Name)
	return obj, nil
}
