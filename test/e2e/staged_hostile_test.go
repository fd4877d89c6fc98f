package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// What a tenant tried from outside, with kubectl, against staged delivery,
// here with real flagd answering what each consumer serves.
var _ = Describe("a FeatureFlagRolloutPolicy against a hostile tenant", func() {
	It("releases nothing when a kubernetes-provider reader appears after an abort, and a promotion left from an earlier rollout passes no later one", func(ctx SpecContext) {
		sw := newStagedWorld(ctx, v1beta1.SyncProviderFile)
		flags, canary, rest, ff, addrs := sw.flags, sw.canary, sw.rest, sw.ff, sw.addrs
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
					{Name: "everyone", Percentage: ptr.To[int32](100)},
				},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))

		By("rollout of on, promoted to everyone: the promotion stays on the policy")
		setVariant(ctx, ff, "on")
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0))))
		on, _ := rolloutOf(ctx, policy)()
		annotate(ctx, policy, deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(on, 0))
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))
		Eventually(resolve(addrs[rest])).Should(Equal(evaluated("on")))

		By("rollout of off, aborted: everyone serves on")
		setVariant(ctx, ff, "off")
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0))))
		off, _ := rolloutOf(ctx, policy)()
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("off")))
		annotate(ctx, policy, deliveryv1alpha1.AbortAnnotation, deliveryv1alpha1.AbortValue(off))
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseAborted))
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))

		By("a reader with provider kubernetes appears in a consumer namespace: it is reported, and the file consumers keep on")
		create(ctx, source(rest, "kube", "reader", v1beta1.Source{Source: flags + "/checkout", Provider: v1beta1.SyncProviderKubernetes}),
			deployment(rest, "reader", appImage, nil))
		Eventually(func() (metav1.Condition, error) {
			p, err := rolloutOf(ctx, policy)()
			if c := meta.FindStatusCondition(p.Conditions, deliveryv1alpha1.ConditionStaged); c != nil {
				return *c, err
			}
			return metav1.Condition{}, err
		}).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", deliveryv1alpha1.ReasonUnstageableConsumers),
			HaveField("Message", ContainSubstring("Deployment "+rest+"/reader"))))
		Consistently(resolve(addrs[canary])).WithTimeout(3 * time.Second).Should(Equal(evaluated("on")))
		Consistently(resolve(addrs[rest])).WithTimeout(3 * time.Second).Should(Equal(evaluated("on")))
		Expect(rolloutOf(ctx, policy)()).To(HaveField("Phase", deliveryv1alpha1.PhaseAborted))

		By("off completed without a promotion (the policy loses its approval for a moment), then a rollout of on again: the promotion left from the first rollout of on does not pass its approval")
		approval := func(on bool) {
			Eventually(func() error {
				var cur deliveryv1alpha1.FeatureFlagRolloutPolicy
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), &cur); err != nil {
					return err
				}
				cur.Spec.Steps[0].Approval = on
				return k8s.Update(ctx, &cur)
			}).Should(Succeed())
		}
		approval(false)
		setFlagMetadata(ctx, ff, "off", "2")
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhaseCompleted),
			HaveField("StableRevision", Not(Equal(on.TargetRevision)))))
		Eventually(resolve(addrs[rest])).Should(Equal(evaluated("off")))
		approval(true)
		Eventually(func() error { // on, as the first rollout of on had it
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
				return err
			}
			f := ff.Spec.FlagSpec.Flags[flagKey]
			f.DefaultVariant = "on"
			ff.Spec.FlagSpec.Flags[flagKey] = f
			ff.Spec.FlagSpec.Metadata = nil
			return k8s.Update(ctx, ff)
		}).Should(Succeed())
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0)),
			HaveField("TargetRevision", on.TargetRevision), HaveField("Rollout", BeNumerically(">", on.Rollout))))
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Consistently(rolloutOf(ctx, policy)).WithTimeout(3*time.Second).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused),
			"the annotation names rollout %d", on.Rollout)
		Consistently(resolve(addrs[rest])).WithTimeout(3 * time.Second).Should(Equal(evaluated("off")))
	})
})
