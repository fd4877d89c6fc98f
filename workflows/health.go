package workflows

import (
	"errors"

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
