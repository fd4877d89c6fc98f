package e2e

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/topology"
)

// rolloutOf reads a rollout policy's status.
func rolloutOf(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) func() (deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, error) {
	return func() (deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, error) {
		var got deliveryv1alpha1.FeatureFlagRolloutPolicy
		err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &got)
		return got.Status, err
	}
}

// annotate sets an annotation of a rollout policy, as the CLI does.
func annotate(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, key, value string) {
	GinkgoHelper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
}

// setFlagMetadata edits a FeatureFlag's flag-set metadata: a new revision
// that serves the same variant.
func setFlagMetadata(ctx context.Context, ff *v1beta1.FeatureFlag, variant, try string) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags[flagKey]
		f.DefaultVariant = variant
		ff.Spec.FlagSpec.Flags[flagKey] = f
		ff.Spec.FlagSpec.Metadata = json.RawMessage(`{"try":"` + try + `"}`)
		return k8s.Update(ctx, ff)
	}).Should(Succeed())
}

func flagSetReady(ctx context.Context, ff *v1beta1.FeatureFlag) func() (*metav1.Condition, error) {
	return func() (*metav1.Condition, error) {
		var got v1beta1.FeatureFlag
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &got); err != nil {
			return nil, err
		}
		return meta.FindStatusCondition(got.Status.Conditions, "Ready"), nil
	}
}

// stagedWorld is the set-up of the staged specs: a flag set at "off" in a
// namespace of its own, read through a ReferenceGrant by a Deployment in
// a canary namespace (labelled stage=canary) and in another, with
// provider, each pod's real flagd answering "off".
type stagedWorld struct {
	flags, canary, rest string
	ff                  *v1beta1.FeatureFlag
	pods                map[string]*corev1.Pod
	addrs               map[string]string // flagd's evaluation address, by namespace
}

func newStagedWorld(ctx context.Context, provider v1beta1.SyncProviderType) stagedWorld {
	GinkgoHelper()
	sw := stagedWorld{flags: newNamespace(ctx), canary: newNamespace(ctx), rest: newNamespace(ctx),
		pods: map[string]*corev1.Pod{}, addrs: map[string]string{}}
	By("namespace " + sw.canary + " labelled stage=canary")
	Eventually(func() error {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: sw.canary}, ns); err != nil {
			return err
		}
		ns.Labels["stage"] = "canary"
		return k8s.Update(ctx, ns)
	}).Should(Succeed())
	sw.ff = flagSet(sw.flags, "checkout", "off")
	create(ctx, sw.ff)
	for _, ns := range []string{sw.canary, sw.rest} {
		create(ctx, fixtures.ReferenceGrant(sw.flags, "from-"+ns, ns, "checkout"),
			source(ns, "flags", "web", v1beta1.Source{Source: sw.flags + "/checkout", Provider: provider}),
			deployment(ns, "web", appImage, nil))
	}
	for _, ns := range []string{sw.canary, sw.rest} {
		sw.pods[ns] = readyPod(ctx, ns, "web")
		sw.addrs[ns] = flagdAddr(sw.pods[ns])
		Eventually(resolve(sw.addrs[ns])).Should(Equal(evaluated("off")))
	}
	return sw
}

var _ = Describe("a FeatureFlagRolloutPolicy", func() {
	It("stages an edit to the canary namespace while the other keeps the stable revision, halts and returns everyone to it when a gate fails, aborts, and completes on promotion", func(ctx SpecContext) {
		sw := newStagedWorld(ctx, v1beta1.SyncProviderFile)
		flags, canary, rest, ff, pods, addrs := sw.flags, sw.canary, sw.rest, sw.ff, sw.pods, sw.addrs

		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
					{Name: "everyone", Percentage: ptr.To[int32](100)},
				},
				Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateRestarts}},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseCompleted), HaveField("StableRevision", Not(BeEmpty()))))
		stable, _ := rolloutOf(ctx, policy)()

		By("an edit: the canary namespace serves it, the other keeps the stable revision; the rollout waits for approval")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("off")))
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0)),
			HaveField("StableRevision", stable.StableRevision),
			HaveField("Message", ContainSubstring("waiting for approval"))))
		Eventually(flagSetReady(ctx, ff)).Should(HaveField("Reason", v1beta1.ReasonRollingOut))
		first, _ := rolloutOf(ctx, policy)()

		By("abort: every consumer serves the stable revision again")
		annotate(ctx, policy, deliveryv1alpha1.AbortAnnotation, deliveryv1alpha1.AbortValue(first))
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("off")))
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseAborted))
		Eventually(flagSetReady(ctx, ff)).Should(HaveField("Reason", v1beta1.ReasonRolloutHalted))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("off")))

		By("another edit starts a new plan; the canary's app restarts: the Restarts gate halts the rollout and everyone serves the stable revision")
		setFlagMetadata(ctx, ff, "on", "2")
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("TargetRevision", Not(Equal(first.TargetRevision)))))
		// Container termination times have seconds: a restart in the second
		// the step started is not counted (staging.GateFailure).
		time.Sleep(1100 * time.Millisecond)
		Expect(syscall.Kill(pidOf(pods[canary], "app"), syscall.SIGKILL)).To(Succeed())
		Eventually(func() (corev1.PodStatus, error) {
			var pod corev1.Pod
			err := k8s.Get(ctx, key(pods[canary]), &pod)
			return pod.Status, err
		}).Should(HaveField("ContainerStatuses", ContainElement(And(HaveField("Name", "app"),
			HaveField("RestartCount", BeNumerically(">=", 1)), HaveField("LastTerminationState.Terminated", Not(BeNil()))))))
		Eventually(rolloutOf(ctx, policy)).WithTimeout(time.Minute).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseHalted), HaveField("Message", ContainSubstring("gate Restarts failed"))))
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("off")))
		Eventually(eventsAbout(ctx, flags, deliveryv1alpha1.FeatureFlagRolloutPolicyKind, "checkout")).Should(
			ContainElement(HaveField("Reason", "RolloutHalted")))

		By("a third edit, promoted: the canary, then everyone, then Completed")
		setFlagMetadata(ctx, ff, "on", "3")
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0))))
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("off")))
		third, _ := rolloutOf(ctx, policy)()
		annotate(ctx, policy, deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(third, 0))
		Eventually(resolve(addrs[rest])).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseCompleted), HaveField("StableRevision", third.TargetRevision)))
		Eventually(flagSetReady(ctx, ff)).Should(HaveField("Status", metav1.ConditionTrue))
	})
})

var _ = Describe("admission of a FeatureFlagRolloutPolicy", func() {
	It("refuses an unknown gate, a percentage outside 0-100, a step with two selectors, a Prometheus gate without its query, a selector that does not parse or matches none of the consumers, saying why", func(ctx SpecContext) {
		flags, canary := newNamespace(ctx), newNamespace(ctx)
		web := deployment(canary, "web", appImage, nil)
		web.Labels = map[string]string{"tier": "front"}
		create(ctx, flagSet(flags, "checkout", "off"), fixtures.ReferenceGrant(flags, "from-canary", canary, "checkout"),
			source(canary, "flags", "web", fixtures.FileRef(flags+"/checkout")), web)
		readyPod(ctx, canary, "web")
		valid := func() *deliveryv1alpha1.FeatureFlagRolloutPolicy {
			return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
				Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
					TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
					Steps: []deliveryv1alpha1.RolloutStep{
						{WorkloadSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}},
					},
					Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePodsReady}},
				},
			}
		}
		refused := func(mutate func(*deliveryv1alpha1.FeatureFlagRolloutPolicy), why string) {
			GinkgoHelper()
			p := valid()
			mutate(p)
			err := k8s.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(why))
		}
		By("the schema, in the API server")
		refused(func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) { p.Spec.Gates[0].Type = "ErrorBudget" },
			`Unsupported value: "ErrorBudget"`)
		refused(func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
			p.Spec.Steps = append(p.Spec.Steps, deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](101)})
		}, "should be less than or equal to 100")
		refused(func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) { p.Spec.Steps[0].Percentage = ptr.To[int32](50) },
			"exactly one of namespaceSelector, workloadSelector, percentage and clusterSelector")
		// This world's manager evaluates Prometheus gates (--prometheus-gates,
		// for the Prometheus gate's spec): the webhook's refusal of them when
		// off is test/admission's (a manager with its defaults).
		refused(func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
			p.Spec.Gates = append(p.Spec.Gates, deliveryv1alpha1.Gate{Type: deliveryv1alpha1.GatePrometheus})
		}, "a Prometheus gate needs prometheus")
		By("flagplane's webhook, against the graph")
		refused(func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
			p.Spec.Steps[0].WorkloadSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fornt"}}
		}, "selects none of the workloads of FeatureFlag checkout's consumers (namespaces "+canary+")")
		refused(func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
			p.Spec.Steps[0].WorkloadSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "In"}}}
		}, "spec.steps[0].workloadSelector")
		By("the valid policy is admitted; its target cannot change")
		admitted := valid()
		create(ctx, admitted)
		Eventually(func() error {
			// The manager writes the status meanwhile: read it again.
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(admitted), admitted); err != nil {
				return err
			}
			admitted.Spec.TargetRef.Name = "other"
			return k8s.Update(ctx, admitted)
		}).Should(MatchError(ContainSubstring("targetRef cannot change")))
	})
})

var _ = Describe("the EvaluationErrors gate", func() {
	It("reads the canary's flagd metrics and halts the rollout when flagd answers an evaluation with an error", func(ctx SpecContext) {
		flags, canary := newNamespace(ctx), newNamespace(ctx)
		ff := flagSet(flags, "checkout", "off")
		create(ctx, ff, fixtures.ReferenceGrant(flags, "from-canary", canary, "checkout"),
			source(canary, "flags", "web", fixtures.FileRef(flags+"/checkout")), deployment(canary, "web", appImage, nil))
		pod := readyPod(ctx, canary, "web")
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps:     []deliveryv1alpha1.RolloutStep{{Percentage: ptr.To[int32](100), Approval: true}},
				Gates:     []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateEvaluationErrors, Max: ptr.To[int64](1)}},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))

		By("an edit reaches the step; errors before it do not count")
		for range 3 {
			_, _ = flagdapi.Resolve(ctx, addr, flagdapi.Boolean, "no-such-flag", nil)
		}
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused))
		By("one error is within the bound")
		_, _ = flagdapi.Resolve(ctx, addr, flagdapi.Boolean, "no-such-flag", nil)
		Consistently(rolloutOf(ctx, policy)).WithTimeout(threeReads).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused))
		By("a second error fails the gate: halted, and flagd serves the stable revision again")
		_, _ = flagdapi.Resolve(ctx, addr, flagdapi.Boolean, "no-such-flag", nil)
		Eventually(rolloutOf(ctx, policy)).WithTimeout(20 * time.Second).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseHalted),
			HaveField("Message", ContainSubstring("gate EvaluationErrors failed: flagd answered 2 evaluation(s) with an error"))))
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))
	})
})

var _ = Describe("a staged rollout over the sync server", func() {
	It("gives each subscriber namespace's streams the revision its plan says; an edit mid-rollout starts a new plan, stated in status; promotion completes it", func(ctx SpecContext) {
		sw := newStagedWorld(ctx, v1beta1.SyncProviderFlagdProxy)
		flags, canary, rest, ff, addrs := sw.flags, sw.canary, sw.rest, sw.ff, sw.addrs
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
					{Percentage: ptr.To[int32](100)},
				},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))

		By("an edit: the canary's stream is sent it, the other's is not")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("off")))
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused),
			HaveField("Steps", ContainElement(HaveField("Consumers", ContainElement(And(
				HaveField("Namespace", canary), HaveField("Serving", Not(BeEmpty())))))))),
			"the step is served: the canary's streams report the revision")
		first, _ := rolloutOf(ctx, policy)()

		By("another edit while the first waits for approval: a new plan, from the stable revision")
		setFlagMetadata(ctx, ff, "on", "2")
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("TargetRevision", Not(Equal(first.TargetRevision))),
			HaveField("StableRevision", first.StableRevision),
			HaveField("ReplacedRevision", first.TargetRevision)))
		Eventually(eventsAbout(ctx, flags, deliveryv1alpha1.FeatureFlagRolloutPolicyKind, "checkout")).Should(ContainElement(And(
			HaveField("Reason", "RolloutStarted"), HaveField("Note", ContainSubstring("replaced revision "+topology.ShortRevision(first.TargetRevision))))))
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("off")))
		second, _ := rolloutOf(ctx, policy)()

		By("promoted: the other namespace's streams are sent it, and the rollout completes")
		annotate(ctx, policy, deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(second, 0))
		Eventually(resolve(addrs[rest])).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhaseCompleted),
			HaveField("StableRevision", second.TargetRevision)))
	})
})
