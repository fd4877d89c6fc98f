package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
)

var _ = Describe("FeatureFlagSource", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("created before its flag set: the reference is pending, then resolves", func(ctx SpecContext) {
		create(ctx, deployment(ns, "web", nil, nil),
			source(ns, "web-flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web")))
		Eventually(sourceCondition(ctx, ns, "web-flags", "ResolvedRefs")).Should(HavePrefix("False/FlagSetNotFound"))
		Eventually(sourceCondition(ctx, ns, "web-flags", "Accepted")).Should(HavePrefix(statusTrue))
		Consistently(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeFalse())

		create(ctx, flagSet(ns, "checkout", "on"))
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeTrue())
		Eventually(sourceCondition(ctx, ns, "web-flags", "ResolvedRefs")).Should(HavePrefix(statusTrue))
		Eventually(sourceCondition(ctx, ns, "web-flags", "Programmed")).Should(Equal("True/Programmed: 1 workload(s) programmed"))
		Eventually(sourceStatus(ctx, ns, "web-flags")).Should(And(HaveField("TargetCount", int32(1)),
			HaveField("Targets", []v1beta1.WorkloadReference{{Kind: "Deployment", Name: "web"}})))
	})

	It("targets changed: workloads gained and lost, ConfigMaps follow", func(ctx SpecContext) {
		other := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout", "on"), deployment(ns, "web", nil, nil), deployment(ns, "api", nil, nil))
		src := source(ns, "flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web"))
		create(ctx, src)
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("Targets", []v1beta1.WorkloadReference{{Kind: "Deployment", Name: "web"}}))

		update(ctx, src, func(s *v1beta1.FeatureFlagSource) {
			s.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "api"}}
		})
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("Targets", []v1beta1.WorkloadReference{{Kind: "Deployment", Name: "api"}}))
		Expect(configMapExists(ctx, configMapOf(ns, ns, "checkout"))()).To(BeTrue())

		By("a target that does not exist yet is picked up when it appears")
		update(ctx, src, func(s *v1beta1.FeatureFlagSource) {
			s.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "StatefulSet", Name: "db"}}
		})
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("TargetCount", int32(0)))
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeFalse())
		create(ctx, statefulSet(ns, "db"))
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("Targets", []v1beta1.WorkloadReference{{Kind: "StatefulSet", Name: "db"}}))
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeTrue())

		By("a selector matches workloads by their labels, in its own namespace only")
		create(ctx, deployment(other, "web", map[string]string{"tier": "front"}, nil))
		update(ctx, src, func(s *v1beta1.FeatureFlagSource) {
			s.Spec.TargetRefs = nil
			s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}
		})
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("TargetCount", int32(0)))
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeFalse())
		Expect(configMapExists(ctx, configMapOf(other, ns, "checkout"))()).To(BeFalse())
	})

	It("settings changed: status follows the new generation", func(ctx SpecContext) {
		create(ctx, flagSet(ns, "checkout", "on"), deployment(ns, "web", nil, nil))
		src := source(ns, "flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web"))
		create(ctx, src)
		Eventually(sourceCondition(ctx, ns, "flags", "Programmed")).Should(HavePrefix(statusTrue))
		update(ctx, src, func(s *v1beta1.FeatureFlagSource) { s.Spec.DebugLogging = ptr.To(true) })
		Eventually(func() int64 { return sourceStatus(ctx, ns, "flags")().ObservedGeneration }).Should(Equal(src.Generation))
		Eventually(sourceCondition(ctx, ns, "flags", "Programmed")).Should(HavePrefix(statusTrue))
	})

	It("deleted: the ConfigMaps only it needed go, and the flag set counts one source less", func(ctx SpecContext) {
		create(ctx, flagSet(ns, "checkout", "on"), deployment(ns, "web", nil, nil))
		src := source(ns, "flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web"))
		create(ctx, src)
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeTrue())
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(HaveField("Sources", int32(1)))
		remove(ctx, src)
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeFalse())
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(And(HaveField("Sources", int32(0)), HaveField("Namespaces", BeEmpty())))
	})

	It("a malformed reference is not accepted, and says so", func(ctx SpecContext) {
		create(ctx, source(ns, "bad", []v1beta1.Source{fileRef("a/b/c")}))
		Eventually(sourceCondition(ctx, ns, "bad", "Accepted")).Should(And(HavePrefix("False/Invalid"),
			ContainSubstring(`spec.sources[0].source: Invalid value: "a/b/c"`)))
		Eventually(sourceCondition(ctx, ns, "bad", "Programmed")).Should(HavePrefix("False/Invalid"))
	})
})

var _ = Describe("InProcessConfiguration", func() {
	It("created, updated, deleted: status lists the workloads that opted in", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inproc"}}
		create(ctx, ipc, deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "inproc"}))
		status := func() v1beta1.InProcessConfigurationStatus {
			got := &v1beta1.InProcessConfiguration{}
			Expect(k8s.Get(ctx, objectKey(ns, "inproc"), got)).To(Succeed())
			return got.Status
		}
		Eventually(status).Should(And(HaveField("TargetCount", int32(1)),
			HaveField("Targets", []v1beta1.WorkloadReference{{Kind: "Deployment", Name: "web"}})))
		update(ctx, ipc, func(c *v1beta1.InProcessConfiguration) { c.Spec.Host = "flagplane.flagplane-system" })
		Eventually(func() int64 { return status().ObservedGeneration }).Should(Equal(ipc.Generation))
		remove(ctx, ipc)
		Eventually(func() error { return k8s.Get(ctx, objectKey(ns, "inproc"), &v1beta1.InProcessConfiguration{}) }).ShouldNot(Succeed())
	})
})
