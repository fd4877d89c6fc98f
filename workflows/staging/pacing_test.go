package staging

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

func TestRolloutProgressWritesArePaced(t *testing.T) {
	g := NewWithT(t)
	k := topology.RolloutPolicyKey("flags", "p")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	old := deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{Phase: deliveryv1alpha1.PhaseProgressing, Step: 1, TargetRevision: "v2", StableRevision: "v1",
		Message:    "step 2: 3 of 100 consumers serve revision v2",
		Conditions: []metav1.Condition{{Type: deliveryv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: deliveryv1alpha1.ReasonStepProgressing, Message: "3 of 100"}}}
	progress := *old.DeepCopy()
	progress.Message, progress.Conditions[0].Message = "step 2: 9 of 100 consumers serve revision v2", "9 of 100"
	progress.Steps = []deliveryv1alpha1.StepStatus{{Name: "step-2", Consumers: []deliveryv1alpha1.ConsumerStatus{{Namespace: "a", Planned: "v2", Serving: "v2"}}}}
	served := *progress.DeepCopy()
	served.StepServedAt = &metav1.Time{Time: now}

	var w Pacing
	g.Expect(w.progressWait(k, old, progress, now)).To(BeZero(), "never written: now")
	w.wrote(k, now)
	g.Expect(w.progressWait(k, old, progress, now.Add(200*time.Millisecond))).To(Equal(300*time.Millisecond), "progress alone waits")
	g.Expect(w.progressWait(k, old, served, now.Add(200*time.Millisecond))).To(BeZero(), "the step served is written at once")
	halted := *progress.DeepCopy()
	halted.Phase = deliveryv1alpha1.PhaseHalted
	g.Expect(w.progressWait(k, old, halted, now.Add(time.Millisecond))).To(BeZero(), "a halt is written at once")
	reason := *progress.DeepCopy()
	reason.Conditions[0].Reason = deliveryv1alpha1.ReasonAwaitingApproval
	g.Expect(w.progressWait(k, old, reason, now.Add(time.Millisecond))).To(BeZero(), "a condition's new reason is written at once")
	g.Expect(w.progressWait(k, old, progress, now.Add(time.Second))).To(BeZero(), "progress after the interval")
}
