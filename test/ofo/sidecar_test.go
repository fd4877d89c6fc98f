package ofo

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// ofoFlagdImage is the flagd image the OpenFeature Operator's (v0.9.2)
// assert files expect, in its sidecar scenarios and on its Flagd kind's
// Deployments: flagd's published image, with the tag that release injects.
const ofoFlagdImage = "ghcr.io/open-feature/flagd:v0.15.4"

// flagdImage is what the scenarios expect of flagplane as this suite
// installs it: the scenario's image, with the tag the suite gives the
// manager (flagdTag; docs/openfeature-operator.md, "Differences":
// sidecar image tag).
var flagdImage = withTag(ofoFlagdImage, flagdTag)

// withTag replaces the tag of an image reference.
func withTag(ref, tag string) string {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref + ":" + tag
}

// flagd-disabled: the scenario's pod opts out with openfeature.dev/enabled:
// "false", and its curl Job, asking through nginx for simple-flag, wants no
// answer. Beyond the scenario, whose pod names no source (so that nothing
// would be injected even if the annotation were ignored), the pod template
// then names a FeatureFlagSource that exists: still nothing; and the
// control, enabled "true": the same template gets flagd, which answers, as
// the same questions observe it.
var _ = Describe("flagd-disabled", func() {
	It("injects nothing into a pod that says openfeature.dev/enabled: \"false\", even naming a source, and no port of the pod serves the flag", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		apply(ns, "flagd-disabled", "install.yaml")
		const deployment = "open-feature-e2e-test-deployment"

		By("the pod as the scenario's assert has it: the nginx container alone")
		pod := theAppPod(ctx, ns, And(
			haveLabel("app", appLabel),
			haveContainers(container(appContainer, nginxImage)),
			runningOnNode(),
		))
		Expect(pod.Spec.InitContainers).To(BeEmpty())

		By("the scenario's Job: no port of the pod answers for simple-flag, now or later")
		Expect(flagAnswers(pod)()).To(BeEmpty())
		Consistently(appPods(ctx, ns)).Should(ConsistOf(HaveField("UID", pod.UID)), "the workload is not rolled to inject flagd later")

		By("beyond the scenario: a FeatureFlagSource, and the pod template naming it, still with enabled \"false\"")
		apply(ns, "fsconfig-file-sync", "install.yaml")
		src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source-configuration"}}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), src)).To(Succeed())
			c := meta.FindStatusCondition(src.Status.Conditions, v1beta1.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.ObservedGeneration).To(Equal(src.Generation))
		}).Should(Succeed(), "flagplane has seen the source")
		patchPodAnnotation(ns, deployment, v1beta1.AnnotationFeatureFlagSource, "source-configuration")
		old := pod.UID
		pod = theAppPod(ctx, ns, And(
			Not(HaveField("UID", old)),
			haveAnnotations(v1beta1.AnnotationEnabled, "false", v1beta1.AnnotationFeatureFlagSource, "source-configuration"),
			haveContainers(container(appContainer, nginxImage)),
			runningOnNode(),
		))
		Expect(pod.Spec.InitContainers).To(BeEmpty())
		Expect(flagAnswers(pod)()).To(BeEmpty())
		Consistently(sourceTargets(ctx, src)).Should(BeEmpty(), "the source targets nothing")
		Expect(k8s.Get(ctx, flagSetConfigMap(ns), &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound), "no ConfigMap generated for the pod")

		By("the control: enabled \"true\", and the same pod template gets flagd, which answers")
		patchPodAnnotation(ns, deployment, v1beta1.AnnotationEnabled, "true")
		old = pod.UID
		pod = theAppPod(ctx, ns, And(
			Not(HaveField("UID", old)),
			haveInitContainers(container("flagd", flagdImage)),
			runningOnNode(),
		))
		Eventually(flagAnswers(pod)).Should(ConsistOf("flagd:8013"))
		Eventually(sourceTargets(ctx, src)).Should(ConsistOf(v1beta1.WorkloadReference{Kind: "Deployment", Name: deployment}), "its own namespace's: no namespace")
		Expect(k8s.Get(ctx, flagSetConfigMap(ns), &corev1.ConfigMap{})).To(Succeed())
	})
})

// The scenarios fsconfig-file-sync, fsconfig-k8s-sync and
// fsconfig-flagd-proxy-sync: the workload first (its pods are admitted
// before the source exists), then the FeatureFlagSource it names.
var _ = DescribeTable("a sidecar of a FeatureFlagSource the workload names",
	func(ctx SpecContext, scenario string, annotations ...string) {
		ns := newNamespace(ctx)
		By("step-00: the flag set and the workload")
		apply(ns, "assets", "manifests.yaml")
		By("step-01: the FeatureFlagSource")
		apply(ns, scenario, "install.yaml")

		By("step-02: the pod as the scenario's assert has it")
		pod := theAppPod(ctx, ns, And(
			haveLabel("app", appLabel),
			haveAnnotations(append([]string{
				"openfeature.dev/enabled", "true",
				"openfeature.dev/featureflagsource", "source-configuration",
			}, annotations...)...),
			haveContainers(container(appContainer, nginxImage)),
			haveInitContainers(And(
				container("flagd", flagdImage),
				HaveField("RestartPolicy", HaveValue(Equal(corev1.ContainerRestartPolicyAlways))),
			)),
			runningOnNode(),
		))

		By("the scenario's Job: the injected flagd answers for simple-flag")
		Eventually(askFlagd(pod)).Should(ContainSubstring(flagdAnswer))
	},
	Entry("fsconfig-file-sync: provider file", "fsconfig-file-sync"),
	Entry("fsconfig-k8s-sync: provider kubernetes, the pod marked for kubernetes sync", "fsconfig-k8s-sync",
		"openfeature.dev/allowkubernetessync", "true"),
	Entry("fsconfig-flagd-proxy-sync: provider flagd-proxy", "fsconfig-flagd-proxy-sync"),
)
