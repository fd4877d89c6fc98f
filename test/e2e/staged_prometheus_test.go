package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/workflows/injection"
)

// errorsQuery is a gate's query written as a hostile tenant would: it
// names the other namespace's series, and it is padded to nearly the
// 4,096 characters the schema takes (a matcher on a label no series has,
// which every series passes). The manager confines it to the namespaces
// that serve the new revision, and a halt writes neither it nor its value.
func errorsQuery(other string) string {
	q := `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace="` + other + `",padding!="%s"}) or vector(0)`
	return fmt.Sprintf(q, strings.Repeat("p", 4000-len(q)))
}

var _ = Describe("the Prometheus gate", func() {
	It("queries a real Prometheus, confined to the namespaces serving the new revision whatever the query names: a step does not end while it cannot be read, even promoted, and flagd's errors in the canary halt the rollout", func(ctx SpecContext) {
		sw := newStagedWorld(ctx, v1beta1.SyncProviderFile)
		flags, canary, rest, ff, addrs := sw.flags, sw.canary, sw.rest, sw.ff, sw.addrs
		metrics := map[string]string{}
		for ns, pod := range sw.pods {
			var ok bool
			metrics[ns], ok = n.Addr(key(pod), injection.SidecarName, injection.DefaultManagementPort)
			Expect(ok).To(BeTrue(), "no host port for flagd's management port of pod %s", pod.Name)
		}

		By("a Prometheus scraping both namespaces' flagd, each labelled with its namespace")
		prom, err := newPromServer(filepath.Join(w.binDir, "prometheus"), GinkgoT().TempDir(), metrics)
		Expect(err).NotTo(HaveOccurred())
		Expect(prom.Start(ctx)).To(Succeed())
		DeferCleanup(prom.Stop)
		Eventually(func() (float64, error) {
			return prom.Query(ctx, `sum(up{namespace=~"`+canary+"|"+rest+`"})`)
		}).Should(Equal(2.0), "Prometheus scrapes both flagd")

		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
					{Name: "everyone", Percentage: ptr.To[int32](100)},
				},
				Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePrometheus, Max: ptr.To[int64](1),
					Prometheus: &deliveryv1alpha1.PrometheusGate{Address: prom.URL(), Query: errorsQuery(rest)}}},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))

		By("an edit reaches the canary, whose gate reads 0: the step waits for approval")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0)),
			HaveField("Message", ContainSubstring("waiting for approval"))))
		first, _ := rolloutOf(ctx, policy)()

		By("Prometheus stopped: the gate cannot be read, and a promotion does not end the step")
		Expect(prom.Stop()).To(Succeed())
		Eventually(rolloutOf(ctx, policy)).WithTimeout(20*time.Second).Should(And(
			HaveField("Step", int32(0)), HaveField("Phase", deliveryv1alpha1.PhasePaused),
			HaveField("Message", ContainSubstring("waiting for approval (flagplane rollout promote ff/checkout); and gate Prometheus (spec.gates[0]) cannot be read"))),
			"still awaiting approval, which GitOps tools show as suspended, and saying the gate cannot be read")
		annotate(ctx, policy, deliveryv1alpha1.PromoteAnnotation, deliveryv1alpha1.PromoteValue(first, 0))
		Eventually(rolloutOf(ctx, policy)).Should(And(
			HaveField("Step", int32(0)), HaveField("Phase", deliveryv1alpha1.PhaseProgressing),
			HaveField("Message", ContainSubstring("the step cannot end while gate Prometheus (spec.gates[0]) cannot be read"))))
		// Three reads of the gate see the promotion.
		Consistently(rolloutOf(ctx, policy)).WithTimeout(threeReads).Should(And(
			HaveField("Step", int32(0)), HaveField("TargetRevision", first.TargetRevision),
			HaveField("Message", ContainSubstring("cannot be read"))))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("off")))

		By("Prometheus back: the promotion given meanwhile ends the step, and the rollout completes")
		Expect(prom.Start(ctx)).To(Succeed())
		Eventually(rolloutOf(ctx, policy)).WithTimeout(30 * time.Second).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseCompleted), HaveField("StableRevision", first.TargetRevision)))
		Eventually(resolve(addrs[rest])).Should(Equal(evaluated("on")))

		By("another edit at the canary; errors of the other namespace's flagd, which keeps the stable revision, do not count, though the query names it")
		setFlagMetadata(ctx, ff, "off", "2")
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("off")))
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused), HaveField("Step", int32(0)),
			HaveField("TargetRevision", Not(Equal(first.TargetRevision)))))
		for range 3 {
			_, _ = flagdapi.Resolve(ctx, addrs[rest], flagdapi.Boolean, "no-such-flag", nil)
		}
		Eventually(func() (float64, error) {
			return prom.Query(ctx, `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace="`+rest+`"})`)
		}).Should(Equal(3.0), "Prometheus has scraped the other namespace's errors")
		Consistently(rolloutOf(ctx, policy)).WithTimeout(threeReads).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused))
		Consistently(resolve(addrs[rest])).Should(Equal(evaluated("on")))

		By("one error at the canary is within max; a second fails the gate: halted, and the canary serves the stable revision again")
		_, _ = flagdapi.Resolve(ctx, addrs[canary], flagdapi.Boolean, "no-such-flag", nil)
		Eventually(func() (float64, error) {
			return prom.Query(ctx, `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace="`+canary+`"})`)
		}).Should(Equal(1.0))
		Consistently(rolloutOf(ctx, policy)).WithTimeout(threeReads).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused))
		_, _ = flagdapi.Resolve(ctx, addrs[canary], flagdapi.Boolean, "no-such-flag", nil)
		Eventually(rolloutOf(ctx, policy)).WithTimeout(20 * time.Second).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseHalted),
			HaveField("Message", ContainSubstring("gate Prometheus (spec.gates[0]) failed: its query's value is more than 1")),
			HaveField("Message", Not(ContainSubstring("padding"))),
			HaveField("Message", WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", 2048)))))
		Eventually(resolve(addrs[canary])).Should(Equal(evaluated("on")))
		Eventually(eventsAbout(ctx, flags, deliveryv1alpha1.FeatureFlagRolloutPolicyKind, "checkout")).Should(
			ContainElement(And(HaveField("Reason", "RolloutHalted"), HaveField("Note", Not(ContainSubstring("padding"))))))
	})
})
