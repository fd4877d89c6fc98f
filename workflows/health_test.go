package workflows_test

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
)

func cond(t, reason string, ok bool) metav1.Condition {
	c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: t + " says " + reason}
	if !ok {
		c.Status = metav1.ConditionFalse
	}
	return c
}

func TestJudge(t *testing.T) {
	types := []string{v1beta1.ConditionAccepted, v1beta1.ConditionResolvedRefs, v1beta1.ConditionProgrammed, v1beta1.ConditionFlagdVersionSupported}
	accepted, resolved := cond(v1beta1.ConditionAccepted, v1beta1.ReasonAccepted, true), cond(v1beta1.ConditionResolvedRefs, v1beta1.ReasonResolvedRefs, true)
	programmed, supported := cond(v1beta1.ConditionProgrammed, v1beta1.ReasonProgrammed, true), cond(v1beta1.ConditionFlagdVersionSupported, v1beta1.ReasonSupportedFlagdVersion, true)
	for _, c := range []struct {
		name      string
		conds     []metav1.Condition
		permanent bool
		want      workflows.Health
		reason    string
	}{
		{"all true", []metav1.Condition{accepted, resolved, programmed, supported}, false, workflows.Ready, v1beta1.ReasonReady},
		{"a type not judged yet", []metav1.Condition{accepted, resolved, programmed}, false, workflows.Reconciling, v1beta1.ReasonPending},
		{"a flag set that may appear", []metav1.Condition{accepted, cond(v1beta1.ConditionResolvedRefs, v1beta1.ReasonFlagSetNotFound, false),
			cond(v1beta1.ConditionProgrammed, v1beta1.ReasonUnresolvedRefs, false), supported}, false, workflows.Reconciling, v1beta1.ReasonFlagSetNotFound},
		{"stalled wins over waiting, whatever the order", []metav1.Condition{accepted, cond(v1beta1.ConditionResolvedRefs, v1beta1.ReasonFlagSetNotFound, false),
			programmed, cond(v1beta1.ConditionFlagdVersionSupported, v1beta1.ReasonUnsupportedSettings, false)}, false, workflows.Stalled, v1beta1.ReasonUnsupportedSettings},
		{"an unvouched tag is no failure", []metav1.Condition{accepted, resolved, programmed,
			cond(v1beta1.ConditionFlagdVersionSupported, v1beta1.ReasonUnsupportedFlagdVersion, false)}, false, workflows.Ready, v1beta1.ReasonReady},
		{"a write to retry", []metav1.Condition{accepted, resolved, cond(v1beta1.ConditionProgrammed, v1beta1.ReasonApplyFailed, false), supported},
			false, workflows.Reconciling, v1beta1.ReasonApplyFailed},
		{"a write refused for good", []metav1.Condition{accepted, resolved, cond(v1beta1.ConditionProgrammed, v1beta1.ReasonApplyFailed, false), supported},
			true, workflows.Stalled, v1beta1.ReasonApplyFailed},
		{"pending on what may still come", []metav1.Condition{accepted, resolved, cond(v1beta1.ConditionProgrammed, v1beta1.ReasonPending, false), supported},
			false, workflows.Reconciling, v1beta1.ReasonPending},
		{"pending on a flag set that is invalid", []metav1.Condition{accepted, resolved, cond(v1beta1.ConditionProgrammed, v1beta1.ReasonPending, false), supported},
			true, workflows.Stalled, v1beta1.ReasonPending},
		{"a flag set too large for a delivery mode: only a user makes it fit", []metav1.Condition{accepted, resolved,
			cond(v1beta1.ConditionProgrammed, v1beta1.ReasonFlagSetTooLarge, false), supported}, false, workflows.Stalled, v1beta1.ReasonFlagSetTooLarge},
		{"invalid", []metav1.Condition{cond(v1beta1.ConditionAccepted, v1beta1.ReasonInvalid, false), resolved,
			cond(v1beta1.ConditionProgrammed, v1beta1.ReasonInvalid, false), supported}, false, workflows.Stalled, v1beta1.ReasonInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			v := workflows.Judge(c.conds, types, c.permanent, "all good")
			g.Expect(v.Health).To(Equal(c.want))
			g.Expect(v.Reason).To(Equal(c.reason))

			var conds []metav1.Condition
			workflows.SetHealth(&conds, 7, v)
			g.Expect(conds).To(HaveLen(3))
			trues := 0
			for _, sc := range conds {
				g.Expect(sc.ObservedGeneration).To(BeEquivalentTo(7))
				g.Expect(sc.Reason).To(Equal(v.Reason))
				if sc.Status == metav1.ConditionTrue {
					trues++
					g.Expect(sc.Message).To(Equal(v.Message))
				}
			}
			g.Expect(trues).To(Equal(1), "exactly one summary condition is True")
			g.Expect(meta.FindStatusCondition(conds, v1beta1.ConditionReady).Message).To(Equal(v.Message), "Ready always says why")
		})
	}
}

func TestPermanentFailure(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	terminating := apierrors.NewForbidden(gr, "x", errors.New("unable to create new content in namespace shop because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"none", nil, false},
		{"a name taken by a foreign object", fmt.Errorf("writing: %w", workflows.GeneratedMetadata{}.NotManaged("ConfigMap", "shop", "x")), true},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("denied by a ValidatingAdmissionPolicy")), true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil), true},
		{"too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{"a namespace going away", terminating, false},
		{"a conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), false},
		{"a timeout", apierrors.NewServerTimeout(gr, "update", 1), false},
		{"not an API error", errors.New("connection refused"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			NewWithT(t).Expect(workflows.PermanentFailure(c.err)).To(Equal(c.want))
		})
	}
}
