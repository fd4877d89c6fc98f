package rolloutstatus

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestWrite(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	policy := func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
		return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pricing"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Name: "pricing"},
				Steps:     []deliveryv1alpha1.RolloutStep{{Name: "canary"}, {Name: "everyone"}},
			},
			Status: st,
		}
	}
	for _, tc := range []struct {
		name string
		st   deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
		pods []v1beta1.NamespaceServing
		want string
	}{{
		name: "waiting for approval at the first step, a consumer not known yet, a step cut short",
		st: deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{
			Phase: deliveryv1alpha1.PhasePaused, Step: 0, StableRevision: "aaa", TargetRevision: "bbb",
			StepStartedAt: &metav1.Time{Time: now.Add(-90 * time.Second)}, Message: "step 1: waiting for approval",
			Steps: []deliveryv1alpha1.StepStatus{
				{Name: "canary", Consumers: []deliveryv1alpha1.ConsumerStatus{{Namespace: "shop-canary", Workloads: 1, Planned: "bbb", Serving: "bbb"}}},
				{Name: "everyone", Consumers: []deliveryv1alpha1.ConsumerStatus{{Namespace: "shop-eu", Workloads: 2, Planned: "aaa"}}, More: 3},
			},
		},
		pods: []v1beta1.NamespaceServing{{Namespace: "shop-eu", Revision: "aaa", Pods: 4, Confirmed: 3}, {Namespace: "shop-canary", Revision: "bbb", Pods: 2, Confirmed: 2}},
		want: `FeatureFlagRolloutPolicy shop/pricing stages FeatureFlag pricing
Phase:    paused
Step:     1 of 2
Stable:   aaa
Target:   bbb
Started:  1m30s ago
Message:  step 1: waiting for approval

STEP      NAMESPACE    WORKLOADS  PLANNED  SERVING  PODS
canary    shop-canary  1          bbb      bbb      2/2 on bbb
everyone  shop-eu      2          aaa      -        3/4 on aaa
everyone  (3 more)                                  
`,
	}, {
		name: "completed, and not accepted",
		st: deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{
			Phase: deliveryv1alpha1.PhaseCompleted, Step: 2, StableRevision: "bbb", TargetRevision: "bbb",
			Conditions: []metav1.Condition{{Type: deliveryv1alpha1.ConditionAccepted, Status: metav1.ConditionFalse, Reason: "Conflicted", Message: "an older policy"}},
		},
		want: `FeatureFlagRolloutPolicy shop/pricing stages FeatureFlag pricing
Phase:    completed
Step:     all done
Stable:   bbb
Target:   bbb
Not accepted (Conflicted): an older policy
`,
	}, {
		name: "not started",
		want: `FeatureFlagRolloutPolicy shop/pricing stages FeatureFlag pricing
Phase:    not started
Step:     1 of 2
Stable:   
Target:   
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var b strings.Builder
			g.Expect(Write(&b, policy(tc.st), tc.pods, now)).To(Succeed())
			g.Expect(b.String()).To(Equal(tc.want))
		})
	}
}
