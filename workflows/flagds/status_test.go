package flagds

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
)

// A Flagd's health from its conditions and its Deployment: what no
// control-plane spec reaches in reasonable time (a progress deadline) or
// at all without scaling (zero replicas).
func TestFlagdVerdict(t *testing.T) {
	inPlace := func(available bool) v1beta1.FlagdStatus {
		st := v1beta1.FlagdStatus{}
		for _, c := range []string{v1beta1.ConditionAccepted, v1beta1.ConditionResolvedRefs, v1beta1.ConditionProgrammed, v1beta1.ConditionFlagdVersionSupported} {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c})
		}
		a := metav1.Condition{Type: v1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: v1beta1.ReasonAvailable, Message: "1 of 1 flagd replicas ready"}
		if !available {
			a.Status, a.Reason, a.Message = metav1.ConditionFalse, v1beta1.ReasonUnavailable, "0 of 1 flagd replicas ready"
		}
		meta.SetStatusCondition(&st.Conditions, a)
		return st
	}
	deployment := func(replicas int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "flagd"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
		d.Status.Conditions = conds
		return d
	}
	for _, c := range []struct {
		name   string
		status v1beta1.FlagdStatus
		dep    *appsv1.Deployment
		want   workflows.Health
		reason string
	}{
		{"serving", inPlace(true), deployment(1), workflows.Ready, v1beta1.ReasonReady},
		{"no pod ready yet", inPlace(false), deployment(1), workflows.Reconciling, v1beta1.ReasonUnavailable},
		{"scaled to zero", inPlace(false), deployment(0), workflows.Ready, v1beta1.ReasonReady},
		{"past its progress deadline", inPlace(false), deployment(1, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
			Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "flagd-1" has timed out progressing.`}),
			workflows.Stalled, v1beta1.ReasonProgressDeadlineExceeded},
		{"progressing", inPlace(false), deployment(1, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
			Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}), workflows.Reconciling, v1beta1.ReasonUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			v := flagdVerdict(c.status, Children{Deployment: c.dep})
			g.Expect(v.Health).To(Equal(c.want), v.Message)
			g.Expect(v.Reason).To(Equal(c.reason))
		})
	}
}
