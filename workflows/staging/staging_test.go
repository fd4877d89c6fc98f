package staging

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func policy(steps ...deliveryv1alpha1.RolloutStep) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
	return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flags", Name: "p", Generation: 1},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: "core.openfeature.dev", Kind: "FeatureFlag", Name: "f"},
			Steps:     steps,
		},
	}
}

// planOf is the plan the topology would give p's status, for consumers a
// (step 0) and b (step 1), the way topology.RolloutPlan computes
// revisions.
func planOf(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) *topology.RolloutPlan {
	s := p.Status
	plan := &topology.RolloutPlan{Policy: topology.RolloutPolicyKey("flags", "p"), Stable: s.StableRevision, Target: s.TargetRevision,
		Phase: s.Phase, Step: int(s.Step), Steps: len(p.Spec.Steps)}
	for i, ns := range []string{"a", "b"} {
		c := topology.PlanConsumer{Namespace: ns, Step: i, Revision: plan.Stable}
		if plan.Phase == deliveryv1alpha1.PhaseCompleted || (plan.Phase != deliveryv1alpha1.PhaseHalted && plan.Phase != deliveryv1alpha1.PhaseAborted && i <= plan.Step) {
			c.Revision = plan.Target
		}
		plan.Consumers = append(plan.Consumers, c)
	}
	return plan
}

func apply(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, r Result) { p.Status = r.Status }

func TestNextWalksTheSteps(t *testing.T) {
	g := NewWithT(t)
	p := policy(
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50), Pause: &metav1.Duration{Duration: time.Minute}},
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100), Approval: true},
	)
	// A new plan, as the topology gives it for an edit.
	plan := &topology.RolloutPlan{Policy: topology.RolloutPolicyKey("flags", "p"), Stable: "v1", Target: "v2",
		Phase: deliveryv1alpha1.PhaseProgressing, Steps: 2, NewPlan: true}
	r := Next(p, plan, Observation{Now: t0})
	g.Expect(r.Status.StableRevision).To(Equal("v1"))
	g.Expect(r.Status.TargetRevision).To(Equal("v2"))
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseProgressing))
	g.Expect(r.EventReason).To(Equal("RolloutStarted"))
	g.Expect(r.Status.ReplacedRevision).To(BeEmpty())
	apply(p, r)

	// Step 1's consumer does not serve v2 yet: wait.
	r = Next(p, planOf(p), Observation{Now: t0.Add(time.Second), Serving: map[string]string{"a": "v1", "b": "v1"}})
	g.Expect(r.Status.Step).To(BeZero())
	g.Expect(r.Status.StepServedAt).To(BeNil())
	g.Expect(r.Status.Message).To(ContainSubstring("0 of 1 consumers serve revision v2"))
	apply(p, r)

	// It does: the pause runs from now.
	r = Next(p, planOf(p), Observation{Now: t0.Add(2 * time.Second), Serving: map[string]string{"a": "v2", "b": "v1"}})
	g.Expect(r.Status.StepServedAt).NotTo(BeNil())
	g.Expect(r.RequeueAfter).To(BeNumerically("~", time.Minute, time.Second))
	apply(p, r)

	// The pause passes: step 2.
	r = Next(p, planOf(p), Observation{Now: t0.Add(63 * time.Second), Serving: map[string]string{"a": "v2", "b": "v1"}})
	g.Expect(r.Status.Step).To(Equal(int32(1)))
	g.Expect(r.EventReason).To(Equal("StepStarted"))
	apply(p, r)

	// Served; approval is required.
	r = Next(p, planOf(p), Observation{Now: t0.Add(64 * time.Second), Serving: map[string]string{"a": "v2", "b": "v2"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
	g.Expect(meta.FindStatusCondition(r.Status.Conditions, deliveryv1alpha1.ConditionReconciling).Reason).To(Equal(deliveryv1alpha1.ReasonAwaitingApproval))
	apply(p, r)

	// A promotion meant for another step does nothing; the right one completes.
	p.Annotations = map[string]string{deliveryv1alpha1.PromoteAnnotation: "v2/0"}
	r = Next(p, planOf(p), Observation{Now: t0.Add(65 * time.Second), Serving: map[string]string{"a": "v2", "b": "v2"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
	p.Annotations = map[string]string{deliveryv1alpha1.PromoteAnnotation: "v2/1"}
	r = Next(p, planOf(p), Observation{Now: t0.Add(65 * time.Second), Serving: map[string]string{"a": "v2", "b": "v2"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseCompleted))
	g.Expect(r.Status.StableRevision).To(Equal("v2"))
	g.Expect(meta.IsStatusConditionTrue(r.Status.Conditions, deliveryv1alpha1.ConditionReady)).To(BeTrue())
}

func TestNextStatesAReplacedRevision(t *testing.T) {
	g := NewWithT(t)
	p := policy(deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50), Approval: true}, deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)})
	p.Status = deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{StableRevision: "v1", TargetRevision: "v2", Phase: deliveryv1alpha1.PhasePaused}
	// An edit while v2 waits for approval: the topology plans v3 from v1.
	plan := &topology.RolloutPlan{Policy: topology.RolloutPolicyKey("flags", "p"), Stable: "v1", Target: "v3",
		Phase: deliveryv1alpha1.PhaseProgressing, Steps: 2, NewPlan: true, Replaced: "v2"}
	r := Next(p, plan, Observation{Now: t0})
	g.Expect(r.Status.ReplacedRevision).To(Equal("v2"))
	g.Expect(r.Status.TargetRevision).To(Equal("v3"))
	g.Expect(r.Status.Step).To(BeZero())
	g.Expect(r.Event).To(ContainSubstring("revision v3 replaced revision v2, which was rolling out at step 1: a new plan from revision v1"))
	// It stays stated while the new plan runs.
	apply(p, r)
	r = Next(p, planOf(p), Observation{Now: t0.Add(time.Second), Serving: map[string]string{"a": "v3"}})
	g.Expect(r.Status.ReplacedRevision).To(Equal("v2"))
}

func TestNextHaltsAndAborts(t *testing.T) {
	g := NewWithT(t)
	p := policy(deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)}, deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)})
	p.Status = deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{StableRevision: "v1", TargetRevision: "v2", Phase: deliveryv1alpha1.PhaseProgressing}

	r := Next(p, planOf(p), Observation{Now: t0, Serving: map[string]string{"a": "v2"}, GateFailure: "gate PodsReady failed: pod a/web-1 is not Ready"})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
	g.Expect(r.Status.Message).To(ContainSubstring("every consumer serves revision v1 again"))
	g.Expect(r.Warning).To(BeTrue())
	g.Expect(meta.IsStatusConditionTrue(r.Status.Conditions, deliveryv1alpha1.ConditionStalled)).To(BeTrue())
	apply(p, r)
	// Halted stays halted: the next edit starts a new plan.
	r = Next(p, planOf(p), Observation{Now: t0.Add(time.Minute), Serving: map[string]string{"a": "v1", "b": "v1"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))

	p.Status.Phase = deliveryv1alpha1.PhaseProgressing
	p.Annotations = map[string]string{deliveryv1alpha1.AbortAnnotation: "v0"}
	r = Next(p, planOf(p), Observation{Now: t0, Serving: map[string]string{"a": "v2"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseProgressing), "an abort of another revision is not this rollout's")
	p.Annotations = map[string]string{deliveryv1alpha1.AbortAnnotation: "v2"}
	r = Next(p, planOf(p), Observation{Now: t0, Serving: map[string]string{"a": "v2"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseAborted))

	p.Annotations = nil
	p.Status.Phase = deliveryv1alpha1.PhaseProgressing
	r = Next(p, planOf(p), Observation{Now: t0, Serving: map[string]string{"a": "v2"}, GateUnknown: "gate Prometheus cannot be read: connection refused"})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseProgressing))
	g.Expect(r.Status.Step).To(BeZero(), "a gate that cannot be read keeps the step from ending")
	g.Expect(r.Status.Message).To(ContainSubstring("cannot end while gate Prometheus cannot be read"))

	p.Spec.Paused = true
	r = Next(p, planOf(p), Observation{Now: t0, Serving: map[string]string{"a": "v2"}})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
}

func TestNextRefuses(t *testing.T) {
	g := NewWithT(t)
	p := policy(deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)})
	p.Spec.Gates = []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePrometheus, Prometheus: &deliveryv1alpha1.PrometheusGate{Address: "http://prometheus:9090", Query: "up"}}}
	plan := &topology.RolloutPlan{Policy: topology.RolloutPolicyKey("flags", "p")}
	r := Next(p, plan, Observation{Now: t0})
	g.Expect(meta.FindStatusCondition(r.Status.Conditions, deliveryv1alpha1.ConditionAccepted).Message).To(ContainSubstring("--prometheus-gates"))
	r = Next(p, plan, Observation{Now: t0, PrometheusGates: true})
	g.Expect(meta.IsStatusConditionTrue(r.Status.Conditions, deliveryv1alpha1.ConditionAccepted)).To(BeTrue())
	p.Spec.Gates = nil

	r = Next(p, nil, Observation{Now: t0})
	g.Expect(meta.FindStatusCondition(r.Status.Conditions, deliveryv1alpha1.ConditionAccepted).Reason).To(Equal(deliveryv1alpha1.ReasonTargetNotFound))

	plan = &topology.RolloutPlan{Policy: topology.RolloutPolicyKey("flags", "older")}
	r = Next(p, plan, Observation{Now: t0})
	g.Expect(meta.FindStatusCondition(r.Status.Conditions, deliveryv1alpha1.ConditionAccepted).Reason).To(Equal(deliveryv1alpha1.ReasonConflicted))

	plan = &topology.RolloutPlan{Policy: topology.RolloutPolicyKey("flags", "p"), Problem: "they read it themselves",
		ProblemReason: deliveryv1alpha1.ReasonUnstageableConsumers, Unstaged: []topology.Key{topology.WorkloadKey(topology.KindDeployment, "c", "web")}}
	r = Next(p, plan, Observation{Now: t0})
	g.Expect(meta.FindStatusCondition(r.Status.Conditions, deliveryv1alpha1.ConditionAccepted).Message).To(ContainSubstring("Deployment c/web"))
	g.Expect(r.Status.Unstaged).To(Equal([]string{"deployment/c/web"}))
}

func TestGates(t *testing.T) {
	g := NewWithT(t)
	w := topology.WorkloadKey(topology.KindDeployment, "a", "web")
	ready := Pod{Namespace: "a", Name: "web-1", Workload: w, Ready: true, ReadySince: t0}
	unready := Pod{Namespace: "a", Name: "web-2", Workload: w, Ready: false, ReadySince: t0}
	podsReady := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePodsReady, For: &metav1.Duration{Duration: 30 * time.Second}}}
	g.Expect(GateFailure(podsReady, []Pod{ready, unready}, t0.Add(10*time.Second), t0)).To(BeEmpty(), "within its grace")
	g.Expect(GateFailure(podsReady, []Pod{ready, unready}, t0.Add(31*time.Second), t0)).To(ContainSubstring("pod a/web-2 of Deployment web is not Ready"))
	g.Expect(NextCheck(podsReady, []Pod{ready, unready}, t0.Add(10*time.Second))).To(Equal(20*time.Second), "when its grace ends, no event says so")
	g.Expect(NextCheck(podsReady, []Pod{ready}, t0.Add(10*time.Second))).To(BeZero())

	restarted := Pod{Namespace: "a", Name: "web-3", Workload: w, Ready: true, Restarts: []Restart{{Container: "app", Count: 2, Finished: t0.Add(5 * time.Second)}}}
	restarts := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateRestarts, Max: ptr.To[int64](1)}}
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0)).To(BeEmpty(), "one restart is within the bound")
	restarted.Restarts = append(restarted.Restarts, Restart{Container: "flagd", Count: 1, Finished: t0.Add(6 * time.Second)})
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0)).To(ContainSubstring("2 container restart(s)"))
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0.Add(10*time.Second))).To(BeEmpty(), "restarts before the step are not the rollout's")
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0.Add(5*time.Second))).To(BeEmpty(), "a restart in the second the step started is not told from one before")

	errorsGate := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateEvaluationErrors, Max: ptr.To[int64](1)}}
	flagd := func(name string, errs int64) Pod {
		return Pod{Namespace: "a", Name: name, Workload: w, Ready: true, ManagementPort: 8014, EvaluationErrors: errs}
	}
	g.Expect(GateFailure(errorsGate, []Pod{flagd("web-1", 1), flagd("web-2", -1)}, t0, t0)).To(BeEmpty(), "one error, and one flagd not read")
	g.Expect(GateFailure(errorsGate, []Pod{flagd("web-1", 1), flagd("web-2", 1)}, t0, t0)).To(ContainSubstring("flagd answered 2 evaluation(s) with an error"))
	g.Expect(GateFailure(errorsGate, []Pod{{Namespace: "a", Name: "no-sidecar", EvaluationErrors: 7}}, t0, t0)).To(BeEmpty(), "a pod without flagd")
}
