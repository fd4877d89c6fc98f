package sizes

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
)

var _ = Describe("a flag set of 2,500 flags, 1.2 MB rendered: more than a ConfigMap holds", func() {
	It("is admitted with a warning that names its size, the limit and the modes that can carry it; a file-mode source for it is refused", func(ctx SpecContext) {
		ns := newNamespace(ctx, "admission")
		big := flagSet(ns, "big", largeFlags, "on")
		size := renderedSize(big)
		Expect(size).To(BeNumerically(">", topology.ConfigMapMaxBytes))
		AddReportEntry("rendered size", size)

		var w warnings
		Expect(warned(&w).Create(ctx, big)).To(Succeed())
		Expect(w.all()).To(ContainElement("flagplane: " + tooLargeForAConfigMap(ns, "big", size)))
		known(ctx, big)

		By("a source that would deliver it with the file provider")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("big")}, fixtures.Targeting("Deployment", "web"))
		err := k8s.Create(ctx, src)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err).To(MatchError(denied(v1beta1.FeatureFlagSourceKind, `FeatureFlagSource.core.openfeature.dev "src" is invalid: spec.sources[0].source: Too long: `+
			tooLargeForAConfigMap(ns, "big", size)+"; this entry could never deliver it")))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(src), &v1beta1.FeatureFlagSource{}))).To(BeTrue(), "not stored")

		By("the same source with flagd-proxy, or kubernetes: admitted")
		for _, p := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFlagdProxy, v1beta1.SyncProviderKubernetes} {
			ok := fixtures.Source(ns, "src-"+string(p), []v1beta1.Source{{Source: "big", Provider: p}}, fixtures.Targeting("Deployment", "web"))
			Expect(k8s.Create(ctx, ok)).To(Succeed(), string(p))
		}
	})

	It("grown past the limit while admission is off: the ConfigMap keeps its last content, which flagd serves; status and Events say which flag set, its size, the limit and what to do", func(ctx SpecContext) {
		ns := newNamespace(ctx, "grow")
		small := flagSet(ns, "flags", 10, "off")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")}, fixtures.Targeting("Deployment", "web"))
		Expect(k8s.Create(ctx, small)).To(Succeed())
		Expect(k8s.Create(ctx, src)).To(Succeed())
		Expect(k8s.Create(ctx, fixtures.Deployment(ns, "web", nil, nil))).To(Succeed())
		cm := topology.ConfigMapName(topology.FlagSetKey(ns, "flags"))
		dataKey := topology.ConfigMapDataKey(topology.FlagSetKey(ns, "flags"))
		last := rendered(small)
		Eventually(configMapData(ctx, ns, cm)).Should(HaveKeyWithValue(dataKey, last))
		Eventually(flagSetStatus(ctx, small)).Should(HaveField("Delivered", "1/1"))
		pod := runningPod(ctx, ns, "web")
		Eventually(evaluates(pod, flagKey(1))).Should(Equal(false))

		grow := func(ff *v1beta1.FeatureFlag) { ff.Spec.FlagSpec = flagSet(ns, "flags", largeFlags, "on").Spec.FlagSpec }
		size := renderedSize(flagSet(ns, "flags", largeFlags, "on"))

		By("admission refuses the edit: a workload reads the flag set with the file provider")
		err := update(ctx, k8s, small, grow)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err).To(MatchError(denied(v1beta1.FeatureFlagKind, `FeatureFlag.core.openfeature.dev "flags" is invalid: spec.flagSpec: Too long: `+
			tooLargeForAConfigMap(ns, "flags", size)+"; 1 workload read it with the file provider and would keep its last content: Deployment "+ns+"/web")))

		By("the validating webhook is down for a moment: the edit gets in")
		withoutValidation(ctx, func() {
			Expect(update(ctx, k8s, small, grow)).To(Succeed())
		})

		By("the ConfigMap keeps the last content that fitted, and flagd serves it")
		Consistently(configMapData(ctx, ns, cm)).Should(HaveKeyWithValue(dataKey, last))
		Consistently(evaluates(pod, flagKey(1))).Should(Equal(false))

		By("the FeatureFlag says why it is not delivered")
		Eventually(condition(ctx, small, v1beta1.ConditionReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonFlagSetTooLarge),
			HaveField("Message", HaveSuffix(tooLargeForAConfigMap(ns, "flags", size)+"; ConfigMap(s) "+ns+"/"+cm+" keep the last content that fitted"))))
		Expect(condition(ctx, small, v1beta1.ConditionStalled)()).To(HaveField("Status", metav1.ConditionTrue))
		Expect(condition(ctx, small, v1beta1.ConditionAccepted)()).To(HaveField("Status", metav1.ConditionTrue), "flagd could load it")
		Expect(flagSetStatus(ctx, small)()).To(HaveField("Delivered", "0/1"))
		Eventually(warningEvents(ctx, small, v1beta1.ReasonFlagSetTooLarge)).Should(ContainElement(ContainSubstring(tooLargeForAConfigMap(ns, "flags", size))))

		By("and so does the source")
		Eventually(condition(ctx, src, v1beta1.ConditionProgrammed)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonFlagSetTooLarge),
			HaveField("Message", tooLargeForAConfigMap(ns, "flags", size)+" (ConfigMap "+ns+"/"+cm+" keeps the last content that fitted)")))
		Expect(condition(ctx, src, v1beta1.ConditionStalled)()).To(HaveField("Status", metav1.ConditionTrue))
		Eventually(warningEvents(ctx, src, v1beta1.ReasonFlagSetTooLarge)).Should(ConsistOf(ContainSubstring(tooLargeForAConfigMap(ns, "flags", size))))
		Expect(warningEvents(ctx, small, "ApplyFailed")()).To(BeEmpty(), "no write the API server refuses was attempted")
		for _, obj := range []client.Object{small, src} {
			Expect(fixtures.KStatus(ctx, k8s, cp.Scheme, obj)).To(HavePrefix("Failed"), "kstatus, and so Flux and kubectl wait, see it stalled")
		}

		By("shrunk again: delivered")
		Expect(update(ctx, k8s, small, func(ff *v1beta1.FeatureFlag) { ff.Spec.FlagSpec = flagSet(ns, "flags", 20, "on").Spec.FlagSpec })).To(Succeed())
		Eventually(evaluates(pod, flagKey(1))).Should(Equal(true))
		Eventually(condition(ctx, src, v1beta1.ConditionProgrammed)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(ctx, small, v1beta1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
	})

	It("is delivered through the sync server and the kubernetes provider: Programmed, delivered, and a flag evaluates", func(ctx SpecContext) {
		ns := newNamespace(ctx, "carry")
		big := flagSet(ns, "big", largeFlags, "on")
		var w warnings
		Expect(warned(&w).Create(ctx, big)).To(Succeed())
		Expect(w.all()).To(ContainElement(ContainSubstring("deliver it with provider flagd-proxy")))

		proxy := fixtures.Source(ns, "proxy", []v1beta1.Source{{Source: "big", Provider: v1beta1.SyncProviderFlagdProxy}}, fixtures.Targeting("Deployment", "proxy"))
		kube := fixtures.Source(ns, "kube", []v1beta1.Source{{Source: "big", Provider: v1beta1.SyncProviderKubernetes}}, fixtures.Targeting("Deployment", "kube"))
		kubeApp := fixtures.Deployment(ns, "kube", nil, nil)
		kubeApp.Spec.Template.Spec.ServiceAccountName = "kube"
		for _, o := range []client.Object{proxy, kube, fixtures.Deployment(ns, "proxy", nil, nil),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube"}}, kubeApp} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}

		for _, app := range []string{"proxy", "kube"} {
			pod := runningPod(ctx, ns, app)
			Eventually(evaluates(pod, flagKey(largeFlags-1))).Should(Equal(true), app)
		}
		Eventually(condition(ctx, proxy, v1beta1.ConditionProgrammed)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(ctx, kube, v1beta1.ConditionProgrammed)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(flagSetStatus(ctx, big)).Should(And(HaveField("Delivered", "1/1"),
			HaveField("Consumers", ConsistOf(And(HaveField("Kind", "SyncSubscribers"), HaveField("Streams", int32(1)), HaveField("Current", int32(1))))),
			HaveField("Unobserved.Workloads", int32(1))))
		// Ready once the pods' flagds confirm the revision too, which may
		// come after the delivery.
		Eventually(condition(ctx, big, v1beta1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
	})
})

// withoutValidation removes flagplane's validating webhooks for the time of
// do, as when the webhook is down, and puts them back.
func withoutValidation(ctx SpecContext, do func()) {
	GinkgoHelper()
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(k8s.List(ctx, &list)).To(Succeed())
	var saved []admissionregistrationv1.ValidatingWebhookConfiguration
	for _, c := range list.Items {
		for _, h := range c.Webhooks {
			if strings.HasPrefix(h.Name, "featureflags.") {
				saved = append(saved, c)
				break
			}
		}
	}
	Expect(saved).NotTo(BeEmpty())
	restore := func(ctx SpecContext) {
		for _, c := range saved {
			c.ResourceVersion, c.UID, c.ManagedFields = "", "", nil
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &c))).To(Succeed())
		}
		// The API server calls the webhook again: an invalid flag set is refused.
		Eventually(func() error {
			return k8s.Create(ctx, invalidFlagSet(), client.DryRunAll)
		}).Should(HaveOccurred())
	}
	DeferCleanup(restore)
	for i := range saved {
		Expect(k8s.Delete(ctx, &saved[i])).To(Succeed())
	}
	Eventually(func() error {
		return k8s.Create(ctx, invalidFlagSet(), client.DryRunAll)
	}).WithTimeout(30*time.Second).Should(Succeed(), "the API server no longer calls the webhook")
	do()
	restore(ctx)
}

// invalidFlagSet is a flag set the webhook refuses: its default variant is
// not one of its variants.
func invalidFlagSet() *v1beta1.FeatureFlag {
	ff := fixtures.FlagSet("default", "invalid", "neither")
	return ff
}
