package workflows

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Health is where an object stands for a tool that waits on it: kstatus's
// Current, InProgress and Failed; Argo CD's Healthy, Progressing and
// Degraded.
type Health int

const (
	// Ready: the object does what it asks.
	Ready Health = iota
	// Reconciling: not yet; flagplane is at work, or waits for something
	// that may still appear.
	Reconciling
	// Stalled: not, until a user acts.
	Stalled
)

// Verdict is an object's health, with the reason and message of what
// decided it.
type Verdict struct {
	Health  Health
	Reason  string
	Message string
}

// stalledReasons are the reasons of a False condition that only a user's
// action changes; any other False reason is waited out (Reconciling).
// ApplyFailed and Pending are either: see Judge.
var stalledReasons = map[string]bool{
	v1beta1.ReasonInvalid:                  true,
	v1beta1.ReasonRefNotPermitted:          true,
	v1beta1.ReasonUnsupportedSettings:      true,
	v1beta1.ReasonGatewayAPINotInstalled:   true,
	v1beta1.ReasonDeliveryFailed:           true,
	v1beta1.ReasonProgressDeadlineExceeded: true,
	// A flag set larger than a delivery mode carries stays so until a user
	// shrinks it or delivers it otherwise.
	v1beta1.ReasonFlagSetTooLarge: true,
	// A sidecar that would pass a limit of what a pod carries stays out
	// until a user makes its workload read fewer flag sets.
	v1beta1.ReasonSidecarRefused: true,
}

// informational are the False reasons that do not keep an object from
// Ready: flagplane cannot vouch for a flagd tag such as latest, and still
// delivers to it.
var informational = map[string]bool{
	v1beta1.ReasonUnsupportedFlagdVersion: true,
}

// Judge is the verdict over an object's conditions of the given types, in
// that order: Stalled when one of them is False for a reason only a user
// changes (the first such one), else Reconciling when one is False (the
// first), else Ready with readyMessage. A False ApplyFailed or Pending is
// Stalled when permanent says that what it waits for needs a user: a write
// refused for good (PermanentFailure), a flag set that is invalid. A type
// absent from conditions is Reconciling: it has not been judged.
func Judge(conditions []metav1.Condition, types []string, permanent bool, readyMessage string) Verdict {
	var waiting *Verdict
	for _, t := range types {
		c := meta.FindStatusCondition(conditions, t)
		if c == nil {
			if waiting == nil {
				waiting = &Verdict{Health: Reconciling, Reason: v1beta1.ReasonPending, Message: t + " is not known yet"}
			}
			continue
		}
		if c.Status == metav1.ConditionTrue || informational[c.Reason] {
			continue
		}
		if stalledReasons[c.Reason] || (permanent && (c.Reason == v1beta1.ReasonApplyFailed || c.Reason == v1beta1.ReasonPending)) {
			return Verdict{Health: Stalled, Reason: c.Reason, Message: c.Message}
		}
		if waiting == nil {
			waiting = &Verdict{Health: Reconciling, Reason: c.Reason, Message: c.Message}
		}
	}
	if waiting != nil {
		return *waiting
	}
	return Verdict{Health: Ready, Reason: v1beta1.ReasonReady, Message: readyMessage}
}

// SetHealth writes the verdict as the three summary conditions, Ready,
// Reconciling and Stalled, with observedGeneration gen: the one it names
// True, the others False, all with its reason. Ready and the True one carry
// its message; the other False ones none, so that status does not grow
// with copies of it.
func SetHealth(conditions *[]metav1.Condition, gen int64, v Verdict) {
	for _, c := range []struct {
		t string
		h Health
	}{{v1beta1.ConditionReady, Ready}, {v1beta1.ConditionReconciling, Reconciling}, {v1beta1.ConditionStalled, Stalled}} {
		cond := metav1.Condition{Type: c.t, Status: metav1.ConditionFalse, Reason: v.Reason, ObservedGeneration: gen}
		if v.Health == c.h {
			cond.Status = metav1.ConditionTrue
		}
		if v.Health == c.h || c.h == Ready {
			cond.Message = v.Message
		}
		meta.SetStatusCondition(conditions, cond)
	}
}

// PermanentFailure tells whether a failed write needs a user's action
// before it can succeed, rather than a retry: a name taken by an object
// flagplane does not manage, a request the API server or an admission
// policy forbids, an object it finds invalid or too large. A namespace that
// is being deleted forbids writes too, and goes away by itself.
func PermanentFailure(err error) bool {
	switch {
	case err == nil:
		return false
	case IsNotManaged(err):
		return true
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err)
}

// WriteError is a failed write of a generated object. Its message is how
// every Event and status condition about a failed write says it: the
// object (kind, namespace/name) and, when the API server answered, its
// reason (Invalid, Forbidden, RequestEntityTooLarge, ...) and message;
// else what went wrong. An object of a generated name that flagplane does
// not manage says so in its own words (NotManagedError names the object).
type WriteError struct {
	Object ObjectRef
	Err    error
}

// WriteFailed is err as a WriteError of ref; nil stays nil, and a
// WriteError stays as it is.
func WriteFailed(ref ObjectRef, err error) error {
	var we *WriteError
	if err == nil || errors.As(err, &we) {
		return err
	}
	return &WriteError{Object: ref, Err: err}
}

func (e *WriteError) Error() string {
	if IsNotManaged(e.Err) {
		return e.Err.Error()
	}
	what := fmt.Sprintf("%s %s/%s not written", e.Object.Kind, e.Object.Namespace, e.Object.Name)
	var status apierrors.APIStatus
	if !errors.As(e.Err, &status) {
		return what + ": " + e.Err.Error()
	}
	s := status.Status()
	reason := string(s.Reason)
	if reason == "" {
		reason = fmt.Sprintf("HTTP %d", s.Code)
	}
	return fmt.Sprintf("%s: the API server refused it (%s): %s", what, reason, s.Message)
}

func (e *WriteError) Unwrap() error { return e.Err }
