package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// stepWatch polls, ten times a second until stopped, the flagd of a
// rollout's canary and rest namespaces and the policy's status, and keeps
// what a restart must not change: when each flagd first answered each
// variant, and every status of the step being watched.
type stepWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// first is, per namespace and variant, when flagd first answered it.
	first map[string]map[string]time.Time
	// canaryBack lists the canary's answers of "off" after "on".
	canaryBack []string
	// step0 is every distinct status of step 0 of the target, one a line.
	step0 []string
}

func watchStep(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, target string, addrs map[string]string, canary string) *stepWatch {
	ctx, cancel := context.WithCancel(ctx)
	sw := &stepWatch{cancel: cancel, done: make(chan struct{}), first: map[string]map[string]time.Time{}}
	go func() {
		defer close(sw.done)
		for ctx.Err() == nil {
			sw.round(ctx, p, target, addrs, canary)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	DeferCleanup(sw.stop)
	return sw
}

func (sw *stepWatch) round(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, target string, addrs map[string]string, canary string) {
	answers := map[string]string{}
	for ns, addr := range addrs {
		if e, err := resolveOnce(addr); err == nil {
			answers[ns] = e.Variant
		}
	}
	st, err := rolloutOf(ctx, p)()
	now := time.Now()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for ns, v := range answers {
		if sw.first[ns] == nil {
			sw.first[ns] = map[string]time.Time{}
		}
		if _, seen := sw.first[ns][v]; !seen {
			sw.first[ns][v] = now
		}
		if ns == canary && v == "off" && !sw.first[ns]["on"].IsZero() {
			sw.canaryBack = append(sw.canaryBack, now.Format(time.StampMilli))
		}
	}
	if err != nil || st.TargetRevision != target || st.Step != 0 || st.Phase == deliveryv1alpha1.PhaseCompleted {
		return
	}
	line := fmt.Sprintf("phase=%s stepStartedAt=%v stepServedAt=%v approved=%d", st.Phase, st.StepStartedAt, st.StepServedAt, st.Approved)
	if n := len(sw.step0); n == 0 || sw.step0[n-1] != line {
		sw.step0 = append(sw.step0, line)
	}
}

func (sw *stepWatch) stop() {
	sw.cancel()
	<-sw.done
}

func (sw *stepWatch) firstAnswer(ns, variant string) time.Time {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.first[ns][variant]
}

var _ = Describe("a FeatureFlagRolloutPolicy across a manager restart", func() {
	// The canary step's pause: long enough to stop the manager a few
	// seconds into it and start it again before it ends.
	const pause = 15 * time.Second

	It("a manager restart mid-step resumes: the step keeps its revision and stepServedAt, the pause ends when it would have, and the rollout completes", func(ctx SpecContext) {
		staged := newStagedWorld(ctx, v1beta1.SyncProviderFile)
		flags, canary, rest, ff, addrs := staged.flags, staged.canary, staged.rest, staged.ff, staged.addrs
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}},
						Pause: &metav1.Duration{Duration: pause}},
					{Name: "everyone", Percentage: ptr.To[int32](100)},
				},
				Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePodsReady}, {Type: deliveryv1alpha1.GateRestarts}},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseCompleted), HaveField("StableRevision", Not(BeEmpty()))))
		stable, _ := rolloutOf(ctx, policy)()

		By("an edit: the canary serves it and the step's pause runs")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseProgressing), HaveField("Step", int32(0)),
			HaveField("TargetRevision", Not(Equal(stable.StableRevision))), HaveField("StepServedAt", Not(BeNil()))))
		before, _ := rolloutOf(ctx, policy)()
		pauseEnds := before.StepServedAt.Add(pause)
		sw := watchStep(ctx, policy, before.TargetRevision, addrs, canary)
		Expect(resolveOnce(addrs[rest])).To(Equal(evaluated("off")))
		Expect(time.Until(pauseEnds)).To(BeNumerically(">", 8*time.Second), "the pause leaves time to restart the manager inside it")

		By("stopping the manager for 3 s, then starting one with the same options")
		Expect(op.Stop()).To(Succeed())
		time.Sleep(3 * time.Second)
		next, err := op.Restart(ctx, w.cp)
		Expect(err).NotTo(HaveOccurred())
		w.op, op = next, next
		restarted := time.Now()
		AddReportEntry("manager restart mid-step", fmt.Sprintf("ready again %v before the pause ends (start-up %v)",
			pauseEnds.Sub(restarted).Round(time.Millisecond), next.Timings.Ready.Round(time.Millisecond)))
		Expect(restarted).To(BeTemporally("<", pauseEnds), "the new manager starts in the middle of the pause")

		By("the next step starts when the same pause ends, and the rollout completes")
		Eventually(resolve(addrs[rest])).WithTimeout(time.Until(pauseEnds) + 30*time.Second).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseCompleted), HaveField("StableRevision", before.TargetRevision)))
		done, _ := rolloutOf(ctx, policy)()
		// The watch compares its own times: wait until it has seen what
		// the spec saw (a loaded machine runs its rounds late).
		Eventually(func() time.Time { return sw.firstAnswer(rest, "on") }).ShouldNot(BeZero())
		sw.stop()
		history := strings.Join(sw.step0, "\n")
		Expect(sw.step0).To(HaveEach(ContainSubstring(fmt.Sprintf("stepServedAt=%v", before.StepServedAt))), "the pause counts from the same moment:\n%s", history)
		Expect(sw.step0).To(HaveEach(HavePrefix("phase="+string(deliveryv1alpha1.PhaseProgressing))), history)
		Expect(done.StepStartedAt.Time).To(BeTemporally(">=", pauseEnds), "the next step starts no earlier than stepServedAt+pause")
		Expect(done.StepStartedAt.Time).To(BeTemporally("<=", pauseEnds.Add(3*time.Second)), "the pause was not restarted")
		Expect(sw.firstAnswer(rest, "on")).To(BeTemporally(">=", pauseEnds), "the rest served the edit before the step ended")
		Expect(sw.canaryBack).To(BeEmpty(), "the canary went back to the stable revision")
		AddReportEntry("manager restart mid-step: the next step", fmt.Sprintf("started %v after stepServedAt+pause; the rest served the edit %v after it",
			done.StepStartedAt.Sub(pauseEnds), sw.firstAnswer(rest, "on").Sub(pauseEnds).Round(time.Millisecond)))
	})
})
