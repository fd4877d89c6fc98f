package staging

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/manifests"
)

var (
	canary = deliveryv1alpha1.RolloutStep{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}}
	all    = deliveryv1alpha1.RolloutStep{Name: "all", Percentage: ptr.To[int32](100)}
)

func condition(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, t string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestNextWalksTheSteps: an edit reaches the canary, waits out its pause
// once served, then an approval, then everyone: every step against the
// graph's own plan.
func TestNextWalksTheSteps(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	paused := canary
	paused.Pause = &metav1.Duration{Duration: time.Minute}
	approved := all
	approved.Approval = true
	w.attach([]deliveryv1alpha1.RolloutStep{paused, approved})
	r := w.next(Observation{Now: t0})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseCompleted), "the policy's first status takes what is served as stable")
	g.Expect(r.Status.Rollout).To(Equal(int64(1)))

	w.edit("green")
	r = w.next(Observation{Now: t0})
	g.Expect(r.Status.StableRevision).To(Equal(w.rev("red")))
	g.Expect(r.Status.TargetRevision).To(Equal(w.rev("green")))
	g.Expect(r.Status.Rollout).To(Equal(int64(2)))
	g.Expect(reasons(r.Events)).To(Equal([]string{"RolloutStarted"}))
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("green"), "b": w.rev("red"), "c": w.rev("red")}))

	// The canary does not serve it yet: wait.
	r = w.next(Observation{Now: t0.Add(time.Second), Serving: map[string]string{"a": w.rev("red"), "b": w.rev("red"), "c": w.rev("red")}})
	g.Expect(r.Status.StepServedAt).To(BeNil())
	g.Expect(r.Status.Message).To(ContainSubstring("0 of 1 consumers serve revision " + topology.ShortRevision(w.rev("green"))))

	// It does: the pause runs from now.
	r = w.next(Observation{Now: t0.Add(2 * time.Second)})
	g.Expect(r.Status.StepServedAt).NotTo(BeNil())
	g.Expect(r.RequeueAfter).To(BeNumerically("~", time.Minute, time.Second))

	// The pause passes: the last step, which waits for approval.
	r = w.next(Observation{Now: t0.Add(63 * time.Second)})
	g.Expect(r.Status.Step).To(Equal(int32(1)))
	g.Expect(reasons(r.Events)).To(Equal([]string{"StepStarted"}))
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("green"), "b": w.rev("green"), "c": w.rev("green")}))
	r = w.next(Observation{Now: t0.Add(64 * time.Second)})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionReconciling).Reason).To(Equal(deliveryv1alpha1.ReasonAwaitingApproval))

	// A promotion of another step does nothing; this step's completes.
	w.annotate(deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(w.policy.Status, 0))
	g.Expect(w.next(Observation{Now: t0.Add(65 * time.Second)}).Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
	w.annotate(deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(w.policy.Status, 1))
	r = w.next(Observation{Now: t0.Add(65 * time.Second)})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseCompleted))
	g.Expect(r.Status.StableRevision).To(Equal(w.rev("green")))
	g.Expect(meta.IsStatusConditionTrue(r.Status.Conditions, deliveryv1alpha1.ConditionReady)).To(BeTrue())
}

// TestNextKeepsTheClockOfConsumersNotReadYet: a manager that just took
// the lead has read no flagd; a consumer it has not read yet, whose copy
// holds the revision and which the status last recorded serving it, keeps
// the step's status (its clock, phase, message and consumers), and the
// step does not end until it is read. A consumer read serving another
// revision, or never recorded serving it, starts the clock over. (Before,
// a new leader started every step's clock over: a pause ran again from
// its first reading, and a step awaiting approval showed another
// stepServedAt.)
func TestNextKeepsTheClockOfConsumersNotReadYet(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	paused := canary
	paused.Pause = &metav1.Duration{Duration: time.Minute}
	w.attach([]deliveryv1alpha1.RolloutStep{paused, all})
	w.next(Observation{Now: t0})
	w.edit("green")
	w.next(Observation{Now: t0})
	served := w.next(Observation{Now: t0.Add(time.Second)}).Status
	g.Expect(served.StepServedAt).NotTo(BeNil())

	unread := func(at time.Duration) Result {
		return w.next(Observation{Now: t0.Add(at), Serving: map[string]string{"a": "", "b": w.rev("red"), "c": w.rev("red")},
			Unread: map[string]bool{"a": true}})
	}
	r := unread(30 * time.Second)
	g.Expect(r.Status.StepServedAt).To(Equal(served.StepServedAt))
	g.Expect(r.Status.Phase).To(Equal(served.Phase))
	g.Expect(r.Status.Message).To(Equal(served.Message))
	g.Expect(r.Status.Steps).To(Equal(served.Steps))
	g.Expect(r.Status.Steps[0].Consumers[0].Serving).To(Equal(w.rev("green")))
	g.Expect(r.RequeueAfter).To(Equal(time.Second))
	r = unread(62 * time.Second)
	g.Expect(r.Status.Step).To(Equal(int32(0)), "the pause is over, but the canary was not read")

	// Read: it serves green, and the pause, counted from its first
	// reading before, is over.
	r = w.next(Observation{Now: t0.Add(63 * time.Second)})
	g.Expect(r.Status.Step).To(Equal(int32(1)))
	g.Expect(reasons(r.Events)).To(Equal([]string{"StepStarted"}))

	// The next rollout's step, served; then its canary is read serving
	// red: the clock starts over.
	w.edit("blue")
	w.next(Observation{Now: t0.Add(70 * time.Second)})
	g.Expect(w.next(Observation{Now: t0.Add(71 * time.Second)}).Status.StepServedAt).NotTo(BeNil())
	r = w.next(Observation{Now: t0.Add(72 * time.Second), Serving: map[string]string{"a": w.rev("red"), "b": w.rev("green"), "c": w.rev("green")}})
	g.Expect(r.Status.StepServedAt).To(BeNil())
	g.Expect(r.Status.Message).To(ContainSubstring("0 of 1 consumers serve revision " + topology.ShortRevision(w.rev("blue"))))

	// Served again; then a consumer not read yet that the status does not
	// record serving blue (a namespace that joined the step): the clock
	// starts over too.
	g.Expect(w.next(Observation{Now: t0.Add(73 * time.Second)}).Status.StepServedAt).NotTo(BeNil())
	w.policy.Status.Steps[0].Consumers[0].Serving = ""
	w.store()
	r = w.next(Observation{Now: t0.Add(74 * time.Second), Serving: map[string]string{"a": "", "b": w.rev("green"), "c": w.rev("green")},
		Unread: map[string]bool{"a": true}})
	g.Expect(r.Status.StepServedAt).To(BeNil())
}

// TestNextActsOnceOnPromoteAndAbort: a promotion or an abort names the
// rollout it was written for; left on the policy, it never acts on a later
// rollout, not even one of the same revision. (Before, both named the
// target revision alone: an edit back to an aborted revision was aborted
// at once, and a promotion left from an earlier rollout passed a later
// one's approval, to every namespace.)
func TestNextActsOnceOnPromoteAndAbort(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	approved := canary
	approved.Approval = true
	w.attach([]deliveryv1alpha1.RolloutStep{approved, all})
	w.next(Observation{Now: t0})
	complete := func() {
		// Complete a rollout without a promotion: its policy loses the
		// approval for a moment.
		w.policy.Spec.Steps[0].Approval = false
		w.store()
		for range 3 {
			w.next(Observation{Now: t0})
		}
		g.Expect(w.policy.Status.Phase).To(Equal(deliveryv1alpha1.PhaseCompleted))
		w.policy.Spec.Steps[0].Approval = true
		w.store()
	}

	// Rollout 2 of green, promoted at its approval, then completed.
	w.edit("green")
	w.next(Observation{Now: t0})
	g.Expect(w.next(Observation{Now: t0}).Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
	w.annotate(deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(w.policy.Status, 0))
	g.Expect(w.next(Observation{Now: t0}).Status.Step).To(Equal(int32(1)))
	g.Expect(w.next(Observation{Now: t0}).Status.Phase).To(Equal(deliveryv1alpha1.PhaseCompleted))

	// Rollout 3 (red) aborted; rollout 4 (blue) completed.
	w.edit("red")
	w.next(Observation{Now: t0})
	w.annotate(deliveryv1alpha1.AbortAnnotation, deliveryv1alpha1.AbortValue(w.policy.Status))
	r := w.next(Observation{Now: t0})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseAborted))
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("green"), "b": w.rev("green"), "c": w.rev("green")}))
	w.edit("blue")
	w.next(Observation{Now: t0})
	complete()

	// Rollout 5, green again: the promotion left on the policy names
	// rollout 2; the approval waits, and green stays in the canary.
	w.edit("green")
	r = w.next(Observation{Now: t0})
	g.Expect(r.Status.TargetRevision).To(Equal(w.rev("green")))
	g.Expect(r.Status.Rollout).To(Equal(int64(5)))
	r = w.next(Observation{Now: t0})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused), "rollout 2's promotion does not pass rollout 5's approval")
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("green"), "b": w.rev("blue"), "c": w.rev("blue")}))

	// Rollout 6, red again: rollout 3's abort does not abort it.
	w.edit("red")
	w.next(Observation{Now: t0})
	r = w.next(Observation{Now: t0})
	g.Expect(r.Status.Rollout).To(Equal(int64(6)))
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused), "rollout 3's abort does not abort rollout 6")
	g.Expect(w.policy.Annotations[deliveryv1alpha1.AbortAnnotation]).To(Equal(w.rev("red") + "/3"))
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("red"), "b": w.rev("blue"), "c": w.rev("blue")}))
}

// TestNextStatesAReplacedRevision: an edit during a rollout starts a new
// plan from the stable revision, and says which target it dropped.
func TestNextStatesAReplacedRevision(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	approved := canary
	approved.Approval = true
	w.attach([]deliveryv1alpha1.RolloutStep{approved, all})
	w.next(Observation{Now: t0})
	w.edit("green")
	w.next(Observation{Now: t0})
	w.edit("blue")
	r := w.next(Observation{Now: t0})
	g.Expect(r.Status.ReplacedRevision).To(Equal(w.rev("green")))
	g.Expect(r.Status.StableRevision).To(Equal(w.rev("red")))
	g.Expect(r.Events[0].Note).To(ContainSubstring("replaced revision " + topology.ShortRevision(w.rev("green")) + ", which was rolling out at step 1"))
	g.Expect(w.next(Observation{Now: t0}).Status.ReplacedRevision).To(Equal(w.rev("green")), "stated while the new plan runs")
}

// TestNextHalts: a failing gate halts the rollout, and every consumer
// serves the stable revision again; the halt stays until the next edit.
func TestNextHalts(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	w.attach([]deliveryv1alpha1.RolloutStep{canary, all})
	w.next(Observation{Now: t0})
	w.edit("green")
	w.next(Observation{Now: t0})
	r := w.next(Observation{Now: t0, GateFailure: "gate PodsReady failed: pod a/web-1 is not Ready"})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
	g.Expect(r.Events).To(ConsistOf(Event{Reason: "RolloutHalted", Warning: true, Note: r.Status.Message}))
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionStalled).Reason).To(Equal(deliveryv1alpha1.ReasonGateFailed))
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("red"), "b": w.rev("red"), "c": w.rev("red")}))
	r = w.next(Observation{Now: t0.Add(time.Minute)})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionStalled).Reason).To(Equal(deliveryv1alpha1.ReasonGateFailed))

	// A gate that cannot be read keeps a step from ending, and halts nothing.
	w.edit("blue")
	w.next(Observation{Now: t0})
	r = w.next(Observation{Now: t0, GateUnknown: "gate Prometheus (spec.gates[0]) cannot be read: connection refused"})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseProgressing))
	g.Expect(r.Status.Step).To(BeZero())
	g.Expect(r.Status.Message).To(ContainSubstring("cannot end while gate Prometheus"))

	w.policy.Spec.Paused = true
	w.store()
	g.Expect(w.next(Observation{Now: t0}).Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
}

// TestNextHaltsWhatItCannotGoOnWith: a rollout that cannot go on ends
// halted with its reason, and every consumer serves the stable revision,
// never frozen halfway.
//
//   - Steps removed while the rollout stood at one of them. (Before, the
//     reconcile panicked at every try, the policy stayed on the target,
//     and the plan gave it to everyone.)
//   - A manager without --prometheus-gates, for a policy with such a gate,
//     mid-rollout and at the next edit. (Before, the policy was not
//     Accepted and nothing moved: the canaries kept the target.)
func TestNextHaltsWhatItCannotGoOnWith(t *testing.T) {
	t.Run("steps removed", func(t *testing.T) {
		w := newWorld(t, "red")
		g := w.g
		second := deliveryv1alpha1.RolloutStep{Name: "half", Percentage: ptr.To[int32](50), Approval: true}
		w.attach([]deliveryv1alpha1.RolloutStep{canary, second, all})
		w.next(Observation{Now: t0})
		w.edit("green")
		w.next(Observation{Now: t0})
		g.Expect(w.next(Observation{Now: t0}).Status.Step).To(Equal(int32(1)))
		g.Expect(w.next(Observation{Now: t0}).Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
		w.policy.Spec.Steps = w.policy.Spec.Steps[:1]
		w.policy.Generation++
		w.store()
		g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("red"), "b": w.rev("red"), "c": w.rev("red")}), "held before the halt is written")
		r := w.next(Observation{Now: t0})
		g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
		g.Expect(r.Status.Message).To(ContainSubstring("the policy now has 1 step(s), and the rollout stood at step 2"))
		g.Expect(condition(r.Status, deliveryv1alpha1.ConditionStalled).Reason).To(Equal(deliveryv1alpha1.ReasonPolicyChanged))
		g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("red"), "b": w.rev("red"), "c": w.rev("red")}))
		g.Expect(condition(w.next(Observation{Now: t0}).Status, deliveryv1alpha1.ConditionStalled).Reason).To(Equal(deliveryv1alpha1.ReasonPolicyChanged))
		// A plan made apart from the graph's says the same.
		g.Expect(func() {
			p := w.policy.DeepCopy()
			p.Status.Phase, p.Status.Step = deliveryv1alpha1.PhaseProgressing, 5
			plan := w.plan()
			plan.Halt, plan.Phase, plan.Step = "", deliveryv1alpha1.PhaseProgressing, 5
			g.Expect(Next(p, plan, Observation{Now: t0, Serving: w.served()}).Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
		}).NotTo(Panic())
	})
	t.Run("a gate this manager does not evaluate", func(t *testing.T) {
		w := newWorld(t, "red")
		g := w.g
		prometheus := deliveryv1alpha1.Gate{Type: deliveryv1alpha1.GatePrometheus,
			Prometheus: &deliveryv1alpha1.PrometheusGate{Address: "http://prometheus:9090", Query: "up"}}
		w.attach([]deliveryv1alpha1.RolloutStep{canary, all}, prometheus)
		on := Observation{Now: t0, PrometheusGates: true}
		w.next(on)
		w.edit("green")
		w.next(on)
		g.Expect(w.served()["a"]).To(Equal(w.rev("green")))
		// The manager restarts without --prometheus-gates.
		r := w.next(Observation{Now: t0})
		g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
		g.Expect(condition(r.Status, deliveryv1alpha1.ConditionAccepted).Reason).To(Equal(deliveryv1alpha1.ReasonUnsupportedGate))
		g.Expect(condition(r.Status, deliveryv1alpha1.ConditionStalled).Reason).To(Equal(deliveryv1alpha1.ReasonUnsupportedGate))
		g.Expect(r.Status.Message).To(ContainSubstring("--prometheus-gates"))
		g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("red"), "b": w.rev("red"), "c": w.rev("red")}))
		// The next edit is halted as it starts: nobody gets it.
		w.edit("blue")
		r = w.next(Observation{Now: t0})
		g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
		g.Expect(r.Status.TargetRevision).To(Equal(w.rev("blue")))
		g.Expect(reasons(r.Events)).To(Equal([]string{"RolloutStarted", "RolloutHalted"}))
		g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("red"), "b": w.rev("red"), "c": w.rev("red")}))
	})
}

// TestNextReportsUnstagedReaders: readers of the FeatureFlag that no plan
// stages (provider kubernetes) are reported (condition Staged False, an
// Event once, status.unstaged), and the rollout goes on for the others.
func TestNextReportsUnstagedReaders(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	approved := canary
	approved.Approval = true
	w.attach([]deliveryv1alpha1.RolloutStep{approved, all})
	r := w.next(Observation{Now: t0})
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionStaged).Status).To(Equal(metav1.ConditionTrue))
	w.edit("green")
	w.next(Observation{Now: t0})
	g.Expect(manifests.Load(w.topo, strings.NewReader(`
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: b, name: kube}
spec:
  sources: [{source: flags/checkout, provider: kubernetes}]
  targetRefs: [{group: apps, kind: Deployment, name: reader}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: b, name: reader}
spec:
  selector: {matchLabels: {app: reader}}
  template:
    metadata: {labels: {app: reader}}
    spec: {containers: [{name: app, image: app}]}
`))).To(Succeed())
	r = w.next(Observation{Now: t0})
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
	staged := condition(r.Status, deliveryv1alpha1.ConditionStaged)
	g.Expect(staged.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(staged.Reason).To(Equal(deliveryv1alpha1.ReasonUnstageableConsumers))
	g.Expect(staged.Message).To(ContainSubstring("Deployment b/reader"))
	g.Expect(r.Status.Unstaged).To(Equal([]string{"deployment/b/reader"}))
	g.Expect(reasons(r.Events)).To(ContainElement(deliveryv1alpha1.ReasonUnstageableConsumers))
	g.Expect(reasons(w.next(Observation{Now: t0}).Events)).NotTo(ContainElement(deliveryv1alpha1.ReasonUnstageableConsumers), "once")
	g.Expect(w.served()).To(Equal(map[string]string{"a": w.rev("green"), "b": w.rev("red"), "c": w.rev("red")}))
}

// TestNextRefuses: a policy that stages nothing says why.
func TestNextRefuses(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, "red")
	w.attach([]deliveryv1alpha1.RolloutStep{all})
	r := Next(w.policy, nil, Observation{Now: t0})
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionAccepted).Reason).To(Equal(deliveryv1alpha1.ReasonTargetNotFound))
	older := w.plan()
	older.Policy = topology.RolloutPolicyKey("flags", "older")
	r = Next(w.policy, older, Observation{Now: t0})
	g.Expect(condition(r.Status, deliveryv1alpha1.ConditionAccepted).Reason).To(Equal(deliveryv1alpha1.ReasonConflicted))
}

// TestNextMessagesFit: whatever a gate reports, the status message fits
// the field (2,048), so that the halt is written; the Event carries the
// same. (Before, a Prometheus gate's message held its expanded query.)
func TestNextMessagesFit(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	w.attach([]deliveryv1alpha1.RolloutStep{canary, all})
	w.next(Observation{Now: t0})
	w.edit("green")
	w.next(Observation{Now: t0})
	long := "gate X failed: " + strings.Repeat("ü", 3000)
	r := w.next(Observation{Now: t0, GateUnknown: long})
	g.Expect(len(r.Status.Message)).To(BeNumerically("<=", MessageMaxLength))
	r = w.next(Observation{Now: t0, GateFailure: long})
	g.Expect(r.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHalted))
	g.Expect(len(r.Status.Message)).To(BeNumerically("<=", MessageMaxLength))
	g.Expect(strings.ToValidUTF8(r.Status.Message, "?")).To(Equal(r.Status.Message))
}

// TestNextReadsALegacyStatus: a status written with 48-bit revisions by an
// earlier version goes on where it stood, and is rewritten with the full
// revisions.
func TestNextReadsALegacyStatus(t *testing.T) {
	w := newWorld(t, "red")
	g := w.g
	w.attach([]deliveryv1alpha1.RolloutStep{canary, all})
	w.next(Observation{Now: t0})
	w.edit("green")
	w.next(Observation{Now: t0})
	w.policy.Status.StableRevision = w.rev("red")[:12]
	w.policy.Status.TargetRevision = w.rev("green")[:12]
	w.store()
	g.Expect(w.plan().NewPlan).To(BeFalse())
	r := w.next(Observation{Now: t0})
	g.Expect(r.Status.StableRevision).To(Equal(w.rev("red")))
	g.Expect(r.Status.TargetRevision).To(Equal(w.rev("green")))
	g.Expect(r.Status.Step).To(Equal(int32(1)))
}
