package realinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
)

// A staged rollout keeps everything it needs to resume in its policy's
// status (workflows/staging): the revisions, the phase, the step and when
// the step's consumers first served it. These specs kill the leader in the
// middle of a step, the way a node failure would, and check that the new
// leader continues the step where the old one stood, with real flagd
// sidecars answering what each consumer serves throughout.

// leaseName is the manager's leader-election Lease, in systemNS.
const leaseName = "flagplane.core.openfeature.dev"

// leaderPod is the manager pod that holds the Lease now, and the Lease. A
// stopped leader releases it and the standby takes it a moment later, so
// the holder is looked up among the live manager pods until it is one.
func leaderPod(ctx context.Context) (string, coordinationv1.Lease) {
	GinkgoHelper()
	var (
		leader string
		lease  coordinationv1.Lease
	)
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: leaseName}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		leader = strings.SplitN(*lease.Spec.HolderIdentity, "_", 2)[0]
		var names []string
		for _, p := range waitForManagers(ctx, 2) {
			names = append(names, p.Name)
		}
		g.Expect(names).To(ContainElement(leader))
	}).WithTimeout(time.Minute).Should(Succeed())
	return leader, lease
}

// killLeader deletes the leader pod with --grace-period=0 --force, and
// returns the new leader once it holds the Lease, and when it took it. (The
// kubelet still sends the old one SIGTERM, and it releases the Lease on its
// way out when it can: the holder is empty for a moment.)
func killLeader(ctx context.Context) (old, next string, acquired time.Time) {
	GinkgoHelper()
	old, _ = leaderPod(ctx)
	By("deleting the leader pod " + old + " with --grace-period=0 --force")
	kubectl("delete", "pod", "-n", systemNS, old, "--grace-period=0", "--force")
	Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: leaseName}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		next = strings.SplitN(*lease.Spec.HolderIdentity, "_", 2)[0]
		g.Expect(next).NotTo(BeElementOf(old, ""))
		g.Expect(lease.Spec.AcquireTime).NotTo(BeNil())
		acquired = lease.Spec.AcquireTime.Time
	}).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "a standby takes the Lease")
	return old, next, acquired
}

// stagedFlag is a FeatureFlag in a namespace of its own, read with the
// file provider across namespaces (FileRef and a ReferenceGrant) by one
// application in each of two namespaces: canary, labelled stage=canary,
// and rest.
type stagedFlag struct {
	flags, canary, rest string
	ff                  *v1beta1.FeatureFlag
	// addrs are the flagd sidecars' evaluation APIs, by namespace.
	addrs map[string]string
}

func newStagedFlag(ctx context.Context) *stagedFlag {
	GinkgoHelper()
	s := &stagedFlag{flags: newNamespace(ctx, "staged-flags"), canary: newNamespace(ctx, "staged-canary"),
		rest: newNamespace(ctx, "staged-rest"), addrs: map[string]string{}}
	Eventually(func() error {
		var ns corev1.Namespace
		if err := k8s.Get(ctx, client.ObjectKey{Name: s.canary}, &ns); err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["stage"] = "canary"
		return k8s.Update(ctx, &ns)
	}).Should(Succeed())
	s.ff = fixtures.FlagSet(s.flags, "checkout", "off")
	create(ctx, s.ff)
	optedIn := map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}
	for _, ns := range []string{s.canary, s.rest} {
		create(ctx, fixtures.ReferenceGrant(s.flags, "from-"+ns, ns, "checkout"),
			fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef(s.flags + "/checkout")}), app(ns, "web", optedIn))
	}
	for _, ns := range []string{s.canary, s.rest} {
		s.addrs[ns] = flagdAddr(injectedPod(ctx, ns, "web"))
		serves(s.addrs[ns], "off")
	}
	return s
}

// policy creates a rollout policy of the flag with steps, and waits until
// it has recorded the current revision as stable.
func (s *stagedFlag) policy(ctx context.Context, steps ...deliveryv1alpha1.RolloutStep) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
	GinkgoHelper()
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.flags, Name: "checkout"},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
			Steps:     steps,
			// Gates a new leader evaluates afresh: they must not misfire
			// on a pod it has not seen before.
			Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePodsReady}, {Type: deliveryv1alpha1.GateRestarts}},
		},
	}
	create(ctx, p)
	Eventually(rolloutStatus(ctx, p)).WithTimeout(deliveryTimeout).Should(And(
		HaveField("Phase", deliveryv1alpha1.PhaseCompleted), HaveField("StableRevision", Not(BeEmpty()))))
	return p
}

func rolloutStatus(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) func() (deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, error) {
	return func() (deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, error) {
		var got deliveryv1alpha1.FeatureFlagRolloutPolicy
		err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &got)
		return got.Status, err
	}
}

// rolloutPoint is what a rollout's status says about where it stands.
type rolloutPoint struct {
	Target, Phase  string
	Step, Approved int32
	StepServedAt   string
	StepStartedAt  string
	message        string
	observedAt     time.Time
	// What each flagd answered in the same round.
	canaryAt, restAt string
}

func pointOf(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) rolloutPoint {
	p := rolloutPoint{Target: st.TargetRevision, Phase: string(st.Phase), Step: st.Step, Approved: st.Approved, message: st.Message}
	if st.StepServedAt != nil {
		p.StepServedAt = st.StepServedAt.UTC().Format(time.RFC3339)
	}
	if st.StepStartedAt != nil {
		p.StepStartedAt = st.StepStartedAt.UTC().Format(time.RFC3339)
	}
	return p
}

func (p rolloutPoint) same(o rolloutPoint) bool {
	return p.Target == o.Target && p.Phase == o.Phase && p.Step == o.Step && p.Approved == o.Approved &&
		p.StepServedAt == o.StepServedAt && p.StepStartedAt == o.StepStartedAt
}

func (p rolloutPoint) String() string {
	return fmt.Sprintf("%s phase=%s step=%d approved=%d stepStartedAt=%s stepServedAt=%s target=%s (%q)",
		p.observedAt.Format(time.StampMilli), p.Phase, p.Step, p.Approved, p.StepStartedAt, p.StepServedAt, p.Target, p.message)
}

// variantAt is a flagd's answer that differs from its previous one.
type variantAt struct {
	at      time.Time
	variant string // "" when flagd did not answer
}

// rolloutRecorder polls, about five times a second until stopped, what the
// flagd of each consumer namespace answers and what the policy's status
// says, and keeps every change of either.
type rolloutRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	points   []rolloutPoint
	answers  map[string][]variantAt
	rounds   int
	silences int
}

func recordRollout(s *stagedFlag, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) *rolloutRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &rolloutRecorder{cancel: cancel, done: make(chan struct{}), answers: map[string][]variantAt{}}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			r.round(ctx, s, p)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	DeferCleanup(r.stop)
	return r
}

func (r *rolloutRecorder) round(ctx context.Context, s *stagedFlag, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
	answered := map[string]string{}
	for _, ns := range []string{s.canary, s.rest} {
		e, err := resolve(s.addrs[ns])()
		if err == nil {
			answered[ns] = e.Variant
		}
	}
	st, err := rolloutStatus(ctx, p)()
	now := time.Now()
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds++
	for _, ns := range []string{s.canary, s.rest} {
		v := answered[ns]
		if v == "" {
			r.silences++
		}
		if h := r.answers[ns]; len(h) == 0 || h[len(h)-1].variant != v {
			r.answers[ns] = append(h, variantAt{at: now, variant: v})
		}
	}
	if err != nil {
		return
	}
	pt := pointOf(st)
	pt.observedAt, pt.canaryAt, pt.restAt = now, answered[s.canary], answered[s.rest]
	if n := len(r.points); n == 0 || !r.points[n-1].same(pt) {
		r.points = append(r.points, pt)
	}
}

func (r *rolloutRecorder) stop() {
	r.cancel()
	<-r.done
}

// history is every status change recorded, one a line.
func (r *rolloutRecorder) history() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, p := range r.points {
		fmt.Fprintf(&b, "%s; flagd canary=%q rest=%q\n", p, p.canaryAt, p.restAt)
	}
	for ns, h := range r.answers {
		fmt.Fprintf(&b, "%s answered:", ns)
		for _, a := range h {
			fmt.Fprintf(&b, " %s %q;", a.at.Format(time.StampMilli), a.variant)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// firstAnswer is when the flagd of ns first answered variant (zero: never).
func (r *rolloutRecorder) firstAnswer(ns, variant string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.answers[ns] {
		if a.variant == variant {
			return a.at
		}
	}
	return time.Time{}
}

// sawServe waits until the recorder has seen the flagd of ns answer
// variant, which a spec has seen already: the times compared are the
// recorder's.
func (r *rolloutRecorder) sawServe(ns, variant string) {
	GinkgoHelper()
	Eventually(func() time.Time { return r.firstAnswer(ns, variant) }).WithTimeout(10 * time.Second).ShouldNot(BeZero())
}

// answeredAfter lists the answers of the flagd of ns after since that
// differ from variant; a round without an answer (a loaded machine's
// timeout) is no answer, and is counted apart (silences).
func (r *rolloutRecorder) answeredAfter(ns string, since time.Time, variant string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.answers[ns] {
		if !a.at.Before(since) && a.variant != "" && a.variant != variant {
			out = append(out, fmt.Sprintf("%q at %s", a.variant, a.at.Format(time.StampMilli)))
		}
	}
	return out
}

// servedPointsOfStep is every recorded status of the step of target from
// the first that says its consumers serve it (stepServedAt set): before,
// the step is being delivered.
func (r *rolloutRecorder) servedPointsOfStep(target string, step int32) []rolloutPoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []rolloutPoint
	for _, p := range r.points {
		if p.Target == target && p.Step == step && p.Phase != string(deliveryv1alpha1.PhaseCompleted) && (len(out) > 0 || p.StepServedAt != "") {
			out = append(out, p)
		}
	}
	return out
}

// inStep waits until the rollout of a new revision stands at step 0 with
// its consumers serving it (stepServedAt set) in phase, and the canary's
// flagd answers "on"; it returns that status.
func inStep(ctx context.Context, s *stagedFlag, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, stable string, phase deliveryv1alpha1.RolloutPhase) deliveryv1alpha1.FeatureFlagRolloutPolicyStatus {
	GinkgoHelper()
	serves(s.addrs[s.canary], "on")
	var st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
	Eventually(func(g Gomega) {
		var err error
		st, err = rolloutStatus(ctx, p)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.TargetRevision).NotTo(BeElementOf(stable, ""))
		g.Expect(st.StableRevision).To(Equal(stable))
		g.Expect(st.Phase).To(Equal(phase))
		g.Expect(st.Step).To(BeZero())
		g.Expect(st.StepServedAt).NotTo(BeNil())
	}).WithTimeout(deliveryTimeout).WithPolling(poll).Should(Succeed())
	Expect(resolve(s.addrs[s.rest])()).To(Equal(evaluated("off")), "the rest serves the stable revision while the canary step runs")
	return st
}

// completes waits until every consumer serves "on" and the rollout of
// target completed, and returns its status.
func completes(ctx context.Context, s *stagedFlag, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, target string) deliveryv1alpha1.FeatureFlagRolloutPolicyStatus {
	GinkgoHelper()
	serves(s.addrs[s.rest], "on")
	serves(s.addrs[s.canary], "on")
	var st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
	Eventually(func(g Gomega) {
		var err error
		st, err = rolloutStatus(ctx, p)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Phase).To(Equal(deliveryv1alpha1.PhaseCompleted))
		g.Expect(st.StableRevision).To(Equal(target))
		g.Expect(st.TargetRevision).To(Equal(target))
	}).WithTimeout(deliveryTimeout).WithPolling(poll).Should(Succeed())
	return st
}

// stepPause is the canary step's pause: long enough for the standby to
// take the Lease of a leader killed a few seconds into it (up to the
// Lease's 15 s plus a retry) and start, with time to spare.
const stepPause = 45 * time.Second

// lateness is how much later than stepServedAt+pause the next step may
// start: the new leader requeues the policy for the end of the pause (and
// 100 ms), and times in the API have seconds.
const lateness = 2 * time.Second

var _ = Describe("staged rollouts across a leader change", func() {
	It("a leader change in the middle of a rollout step resumes where it was", func(ctx SpecContext) {
		s := newStagedFlag(ctx)
		p := s.policy(ctx,
			deliveryv1alpha1.RolloutStep{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}},
				Pause: &metav1.Duration{Duration: stepPause}},
			deliveryv1alpha1.RolloutStep{Name: "everyone", Percentage: ptr.To[int32](100)})
		stable, err := rolloutStatus(ctx, p)()
		Expect(err).NotTo(HaveOccurred())
		rec := recordRollout(s, p)

		By("an edit: the canary serves it and the step's pause runs")
		edited := time.Now()
		setVariant(ctx, s.ff, "on")
		before := inStep(ctx, s, p, stable.StableRevision, deliveryv1alpha1.PhaseProgressing)
		pauseEnds := before.StepServedAt.Add(stepPause)
		AddReportEntry("staged (leader change mid-pause): edit to the canary serving", fmt.Sprintf("%s (stepServedAt %s)",
			fmtDuration(time.Since(edited)), before.StepServedAt.UTC().Format(time.RFC3339)))
		Expect(time.Until(pauseEnds)).To(BeNumerically(">", 25*time.Second),
			"the pause must leave the standby time to take over; the canary took too long to serve the edit")

		old, next, acquired := killLeader(ctx)
		By(fmt.Sprintf("%s took the Lease at %s, %s before the pause ends", next, acquired.Format(time.StampMilli), fmtDuration(pauseEnds.Sub(acquired))))
		Expect(acquired).To(BeTemporally("<", pauseEnds), "the new leader takes over in the middle of the pause (otherwise this proves nothing)")

		By("the new leader keeps the step, and starts the next one when the same pause ends")
		var advanced time.Time
		Eventually(func(g Gomega) {
			st, err := rolloutStatus(ctx, p)()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.TargetRevision).To(Equal(before.TargetRevision))
			g.Expect(st.Step >= 1 || st.Phase == deliveryv1alpha1.PhaseCompleted).To(BeTrue())
			advanced = time.Now()
		}).WithTimeout(time.Until(pauseEnds)+deliveryTimeout).WithPolling(100*time.Millisecond).Should(Succeed(), rec.history)
		done := completes(ctx, s, p, before.TargetRevision)
		rec.sawServe(s.rest, "on")
		rec.stop()
		history := rec.history()
		AddReportEntry("staged (leader change mid-pause): status and flagd answers", history)

		By("while the step ran, through the leader change, the status kept its revision, its step and stepServedAt")
		step0 := rec.servedPointsOfStep(before.TargetRevision, 0)
		Expect(step0).NotTo(BeEmpty())
		for _, pt := range step0 {
			Expect(pt.Phase).To(Equal(string(deliveryv1alpha1.PhaseProgressing)), history)
			Expect(pt.StepServedAt).To(Equal(pointOf(before).StepServedAt), "the pause counts from the same moment\n%s", history)
			Expect(pt.StepStartedAt).To(Equal(pointOf(before).StepStartedAt), history)
		}
		Expect(done.StepStartedAt).NotTo(BeNil())
		nextStep := done.StepStartedAt.Time
		Expect(nextStep).To(BeTemporally(">=", pauseEnds), "the next step starts no earlier than stepServedAt+pause\n%s", history)
		Expect(nextStep).To(BeTemporally("<=", pauseEnds.Add(lateness)), "the pause was not restarted\n%s", history)

		By("the rest never served the new revision before the step ended, and the canary never went back")
		Expect(rec.firstAnswer(s.rest, "on")).To(BeTemporally(">=", pauseEnds), history)
		Expect(rec.answeredAfter(s.canary, rec.firstAnswer(s.canary, "on"), "on")).To(BeEmpty(), history)
		AddReportEntry("staged (leader change mid-pause): timeline", fmt.Sprintf(
			"leader %s killed, %s took the Lease %s before the pause ended; next step started %s after stepServedAt+pause (seen %s after); the rest first served the edit %s after it; %d polling rounds",
			old, next, fmtDuration(pauseEnds.Sub(acquired)), fmtDuration(nextStep.Sub(pauseEnds)), fmtDuration(advanced.Sub(pauseEnds)),
			fmtDuration(rec.firstAnswer(s.rest, "on").Sub(pauseEnds)), rec.rounds))
		AddReportEntry("staged (leader change mid-pause): flagd polls without an answer", fmt.Sprint(rec.silences))
		waitForManagers(ctx, 2)
	})

	It("a leader change while a step waits for approval resumes there; promoted afterwards, the rollout completes", func(ctx SpecContext) {
		s := newStagedFlag(ctx)
		p := s.policy(ctx,
			deliveryv1alpha1.RolloutStep{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
			deliveryv1alpha1.RolloutStep{Name: "everyone", Percentage: ptr.To[int32](100)})
		stable, err := rolloutStatus(ctx, p)()
		Expect(err).NotTo(HaveOccurred())
		rec := recordRollout(s, p)

		By("an edit: the canary serves it and the step waits for approval")
		setVariant(ctx, s.ff, "on")
		before := inStep(ctx, s, p, stable.StableRevision, deliveryv1alpha1.PhasePaused)
		Expect(before.Message).To(ContainSubstring("waiting for approval"))
		Expect(before.Approved).To(Equal(int32(-1)))

		_, next, _ := killLeader(ctx)
		By("the new leader " + next + " has started its workflows: it stays at the step")
		Eventually(logsOf(systemNS, next, "manager")).WithTimeout(podReadyTimeout).WithPolling(time.Second).
			Should(ContainSubstring("every status reconciled once"))
		Consistently(func() (rolloutPoint, error) {
			st, err := rolloutStatus(ctx, p)()
			return pointOf(st), err
		}).WithTimeout(10*time.Second).WithPolling(poll).Should(Satisfy(pointOf(before).same), rec.history)
		Expect(resolve(s.addrs[s.rest])()).To(Equal(evaluated("off")))

		By("promoted: everyone serves the edit and the rollout completes")
		promoted := time.Now()
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			deliveryv1alpha1.PromoteAnnotation: deliveryv1alpha1.PromoteValue(before, 0)}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		done := completes(ctx, s, p, before.TargetRevision)
		rec.sawServe(s.rest, "on")
		rec.stop()
		history := rec.history()
		AddReportEntry("staged (leader change awaiting approval): status and flagd answers", history)
		Expect(done.Approved).To(BeNumerically(">=", 0))

		for _, pt := range rec.servedPointsOfStep(before.TargetRevision, 0) {
			if pt.Approved < 0 {
				Expect(pt.Phase).To(Equal(string(deliveryv1alpha1.PhasePaused)), history)
				Expect(pt.StepServedAt).To(Equal(pointOf(before).StepServedAt), history)
			}
		}
		Expect(rec.firstAnswer(s.rest, "on")).To(BeTemporally(">=", promoted), "the rest serves the edit only once promoted\n%s", history)
		Expect(rec.answeredAfter(s.canary, rec.firstAnswer(s.canary, "on"), "on")).To(BeEmpty(), history)
		AddReportEntry("staged (leader change awaiting approval): promotion to the rest serving", fmtDuration(rec.firstAnswer(s.rest, "on").Sub(promoted)))
		waitForManagers(ctx, 2)
	})
})
