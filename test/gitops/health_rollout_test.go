package gitops

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/gitopshealth"
)

// healthyGate is the readiness gate of the consuming pod: the spec sets
// its condition as a health checker would, and the PodsReady gate of a
// rollout reads the pod's Ready.
const healthyGate = "gitops.flagplane.dev/healthy"

var _ = Describe("Health of a FeatureFlagRolloutPolicy: kstatus, kubectl wait, Argo CD and Flux read every state of a staged rollout", func() {
	It("InProgress while a step runs, Suspended to Argo CD while it waits for approval, Failed when a gate halts it, Current once completed", func(ctx SpecContext) {
		ns, ff, pod := rolloutScene(ctx, "rollout")
		pol := rolloutPolicy(ns, "checkout", []deliveryv1alpha1.RolloutStep{
			{Name: "canary", Percentage: ptr.To[int32](100), Pause: &metav1.Duration{Duration: time.Hour}},
			{Name: "everyone", Percentage: ptr.To[int32](100), Approval: true},
		}, deliveryv1alpha1.Gate{Type: deliveryv1alpha1.GatePodsReady})
		create(ctx, pol)
		Eventually(rolloutPhase(ctx, pol)).Should(Equal(deliveryv1alpha1.PhaseCompleted))
		u := currentVersion(ctx, pol)
		expectToolsOn(u, current)
		expectSummaryOn(u, v1beta1.ConditionReady)

		By("an edit: the first step serves it and pauses for an hour")
		setDefaultVariant(ctx, ff, "off")
		Eventually(condition(ctx, pol, deliveryv1alpha1.ConditionReconciling)).Should(Equal("True/" + deliveryv1alpha1.ReasonStepProgressing))
		Eventually(rolloutMessage(ctx, pol)).Should(ContainSubstring("pausing until"))
		expectTools(ctx, pol, inProgress)
		expectSummary(ctx, pol, v1beta1.ConditionReconciling)

		By("promoted past the pause, the second step waits for approval: Suspended")
		promote(ctx, pol, 0)
		Eventually(condition(ctx, pol, deliveryv1alpha1.ConditionReconciling)).Should(Equal("True/" + deliveryv1alpha1.ReasonAwaitingApproval))
		expectVerdict(ctx, pol, verdict{kstatus: inProgress, argo: gitopshealth.Suspended, testdata: "suspended_awaiting_approval"})
		expectSummary(ctx, pol, v1beta1.ConditionReconciling)
		out, err := cp.Kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=2s", "featureflagrolloutpolicies.delivery.flagplane.dev/checkout")
		Expect(err).To(HaveOccurred(), "kubectl wait must not return for a rollout waiting for approval: %s", out)

		By("the consuming pod turns unready: the PodsReady gate halts the rollout")
		setHealthy(ctx, pod, false)
		Eventually(rolloutPhase(ctx, pol)).Should(Equal(deliveryv1alpha1.PhaseHalted))
		Eventually(health(ctx, pol)).Should(And(HavePrefix(failed), ContainSubstring("gate PodsReady failed")))
		expectVerdict(ctx, pol, verdict{kstatus: failed, argo: gitopshealth.Degraded, testdata: "degraded_halted"})
		expectSummary(ctx, pol, v1beta1.ConditionStalled)
		kubectl("wait", "-n", ns, "--for=condition=Stalled", "--timeout=10s", "featureflagrolloutpolicies.delivery.flagplane.dev/checkout")

		By("the pod Ready again, a new edit promoted through both steps: Current")
		setHealthy(ctx, pod, true)
		setFlagSetMetadata(ctx, ff, "2")
		Eventually(rolloutMessage(ctx, pol)).Should(ContainSubstring("pausing until"))
		promote(ctx, pol, 0)
		Eventually(condition(ctx, pol, deliveryv1alpha1.ConditionReconciling)).Should(Equal("True/" + deliveryv1alpha1.ReasonAwaitingApproval))
		promote(ctx, pol, 1)
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=30s", "featureflagrolloutpolicies.delivery.flagplane.dev/checkout")
		Expect(rolloutPhase(ctx, pol)()).To(Equal(deliveryv1alpha1.PhaseCompleted))
		expectTools(ctx, pol, current)
		expectSummary(ctx, pol, v1beta1.ConditionReady)
		Expect(live(ctx, pol).GetGeneration()).To(BeEquivalentTo(1), "annotations drove the rollout: the recorded states are of generation 1")
	})

	It("InProgress before flagplane writes its status, Suspended to Argo CD while spec.paused holds it, Failed once aborted and when another policy stages the flag set", func(ctx SpecContext) {
		ns, ff, _ := rolloutScene(ctx, "paused")
		pol := rolloutPolicy(ns, "checkout", []deliveryv1alpha1.RolloutStep{
			{Name: "everyone", Percentage: ptr.To[int32](100)},
		})
		pol.Spec.Paused = true

		By("the object the API server would store: its status defaulted, not observed")
		fresh := dryRunCreate(ctx, pol)
		Expect(fresh.GetGeneration()).To(BeEquivalentTo(1))
		Expect(fresh.Object["status"]).To(HaveKeyWithValue("observedGeneration", BeEquivalentTo(0)))
		Expect(kstatusOf(fresh)).To(HavePrefix(inProgress))
		argo, err := gitopshealth.Argo(fresh)
		Expect(err).NotTo(HaveOccurred())
		Expect(argo).To(Equal(gitopshealth.Result{Status: gitopshealth.Progressing, Message: "Waiting for flagplane to observe generation 1"}))
		Expect(gitopshealth.Flux(fresh)).To(Equal(inProgress))
		recordTestdata(fresh, "progressing_not_yet_reconciled", argo)

		create(ctx, pol)
		Eventually(rolloutPhase(ctx, pol)).Should(Equal(deliveryv1alpha1.PhaseCompleted))

		By("an edit while spec.paused: Suspended")
		setFlagSetMetadata(ctx, ff, "2")
		Eventually(condition(ctx, pol, deliveryv1alpha1.ConditionReconciling)).Should(Equal("True/" + deliveryv1alpha1.ReasonPaused))
		expectVerdict(ctx, pol, verdict{kstatus: inProgress, argo: gitopshealth.Suspended, testdata: "suspended_paused"})
		expectSummary(ctx, pol, v1beta1.ConditionReconciling)

		By("aborted: Failed")
		target := live(ctx, pol)
		revision, _, _ := unstructured.NestedString(target.Object, "status", "targetRevision")
		Expect(revision).NotTo(BeEmpty())
		rollout, _, _ := unstructured.NestedInt64(target.Object, "status", "rollout")
		annotateRollout(ctx, pol, deliveryv1alpha1.AbortAnnotation,
			deliveryv1alpha1.AbortValue(deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{TargetRevision: revision, Rollout: rollout}))
		Eventually(rolloutPhase(ctx, pol)).Should(Equal(deliveryv1alpha1.PhaseAborted))
		expectVerdict(ctx, pol, verdict{kstatus: failed, argo: gitopshealth.Degraded, testdata: "degraded_aborted"})
		expectSummary(ctx, pol, v1beta1.ConditionStalled)

		By("a second policy of the flag set is not accepted: Failed")
		second := rolloutPolicy(ns, "second", []deliveryv1alpha1.RolloutStep{{Percentage: ptr.To[int32](100)}})
		create(ctx, second)
		Eventually(condition(ctx, second, deliveryv1alpha1.ConditionAccepted)).Should(Equal("False/" + deliveryv1alpha1.ReasonConflicted))
		Eventually(health(ctx, second)).Should(And(HavePrefix(failed), ContainSubstring("FeatureFlagRolloutPolicy checkout (older) stages FeatureFlag flags")))
		expectVerdict(ctx, second, verdict{kstatus: failed, argo: gitopshealth.Degraded, testdata: "degraded_not_accepted"})
		expectSummary(ctx, second, v1beta1.ConditionStalled)
	})
})

// rolloutScene is a flag set read, through a source with the file
// provider, by Deployment web of a namespace of its own, whose one pod has
// the readiness gate healthyGate, set True: the flag set's one consumer,
// delivered.
func rolloutScene(ctx context.Context, prefix string) (string, *v1beta1.FeatureFlag, *corev1.Pod) {
	GinkgoHelper()
	ns := newNamespace(ctx, prefix)
	ff := fixtures.FlagSet(ns, "flags", "on")
	web := fixtures.Deployment(ns, "web", nil, map[string]string{
		v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"})
	web.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: healthyGate}}
	create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")}), web)
	pod := &corev1.Pod{}
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		*pod = pods.Items[0]
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.ContainersReady), HaveField("Status", corev1.ConditionTrue))))
	}).Should(Succeed())
	setHealthy(ctx, pod, true)
	Eventually(health(ctx, ff)).Should(HavePrefix(current))
	return ns, ff, pod
}

// rolloutPolicy stages the edits of FeatureFlag flags of namespace ns.
func rolloutPolicy(ns, name string, steps []deliveryv1alpha1.RolloutStep, gates ...deliveryv1alpha1.Gate) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
	return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "flags"},
			Steps:     steps,
			Gates:     gates,
		},
	}
}

// rolloutPhase is the phase of a rollout policy as the API server holds it.
func rolloutPhase(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) func() (deliveryv1alpha1.RolloutPhase, error) {
	return func() (deliveryv1alpha1.RolloutPhase, error) {
		got := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(p), got)
		return got.Status.Phase, err
	}
}

// rolloutMessage is the status message of a rollout policy.
func rolloutMessage(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) func() (string, error) {
	return func() (string, error) {
		got := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(p), got)
		return got.Status.Message, err
	}
}

// promote ends the wait of the rollout's step, as `flagplane rollout
// promote` does, once the policy is at that step.
func promote(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, step int32) {
	GinkgoHelper()
	got := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Step).To(Equal(step))
		g.Expect(got.Status.TargetRevision).NotTo(BeEmpty())
	}).Should(Succeed())
	annotateRollout(ctx, p, deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(got.Status, step))
}

// annotateRollout sets an annotation of a rollout policy, as the CLI does.
func annotateRollout(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, key, value string) {
	GinkgoHelper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// setHealthy sets the pod's readiness gate condition through its status
// subresource, as the health checker owning it would, and waits until the
// pod's Ready follows.
func setHealthy(ctx context.Context, pod *corev1.Pod, healthy bool) {
	GinkgoHelper()
	status := corev1.ConditionFalse
	if healthy {
		status = corev1.ConditionTrue
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": healthyGate, "status": status, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Status().Patch(ctx, pod.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, patch))).To(Succeed())
	Eventually(func() ([]corev1.PodCondition, error) {
		got := &corev1.Pod{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), got)
		return got.Status.Conditions, err
	}).Should(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", status))))
}

// setFlagSetMetadata edits the flag set's metadata: a new revision that
// serves the same flags.
func setFlagSetMetadata(ctx context.Context, ff *v1beta1.FeatureFlag, try string) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return err
		}
		ff.Spec.FlagSpec.Metadata = json.RawMessage(`{"try":"` + try + `"}`)
		return k8s.Update(ctx, ff)
	}).Should(Succeed())
}

// dryRunCreate is obj as the API server would store it if created now,
// before any controller sees it, as a GitOps tool reads it: unstructured,
// with the CRD's defaults.
func dryRunCreate(ctx context.Context, obj client.Object) *unstructured.Unstructured {
	GinkgoHelper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	gvks, _, err := cp.Scheme.ObjectKinds(obj)
	Expect(err).NotTo(HaveOccurred())
	u.SetGroupVersionKind(gvks[0])
	unstructured.RemoveNestedField(u.Object, "status")
	Expect(k8s.Create(ctx, u, client.DryRunAll)).To(Succeed())
	return u
}
