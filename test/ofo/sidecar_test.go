package ofo

import (
	"github.com/flagplane/flagplane/workflows/injection"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// flagdImage is the image flagplane injects by default. The OpenFeature
// Operator's scenarios assert its own default, the same image with tag
// v0.15.4; flagplane pins the flagd release it is tested with (README,
// "Differences from the OpenFeature Operator": sidecar image tag).
var flagdImage = injection.DefaultSidecarImage + ":" + injection.DefaultSidecarTag

var _ = Describe("flagd-disabled", func() {
	It("injects nothing into a pod that says openfeature.dev/enabled: \"false\", and no flagd answers", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		apply(ns, "flagd-disabled", "install.yaml")

		By("the pod as the scenario's assert has it: the nginx container alone")
		pod := theAppPod(ctx, ns, And(
			haveLabel("app", appLabel),
			haveContainers(container(appContainer, nginxImage)),
			runningOnNode(),
		))
		Expect(pod.Spec.InitContainers).To(BeEmpty())

		By("the scenario's Job: nothing answers on flagd's port, now or later")
		Expect(pod.Spec.Containers[0].Ports).To(HaveExactElements(HaveField("ContainerPort", BeEquivalentTo(80))))
		_, err := askFlagd(pod)()
		Expect(err).To(MatchError(ContainSubstring("no container flagd listens")))
		Consistently(appPods(ctx, ns)).Should(ConsistOf(HaveField("UID", pod.UID)), "the workload is not rolled to inject flagd later")
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
