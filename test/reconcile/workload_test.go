package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

var _ = Describe("Workloads", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout", "on"), source(ns, "flags", []v1beta1.Source{fileRef("checkout")}))
	})

	optIn := map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "flags"}

	It("Deployment opts in by annotation, opts out, and is deleted", func(ctx SpecContext) {
		d := deployment(ns, "web", nil, optIn)
		create(ctx, d)
		cm := configMapOf(ns, ns, "checkout")
		Eventually(configMapExists(ctx, cm)).Should(BeTrue())
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("TargetCount", int32(1)))

		By("annotations changed: openfeature.dev/enabled off")
		update(ctx, d, func(d *appsv1.Deployment) { d.Spec.Template.Annotations[v1beta1.AnnotationEnabled] = "false" })
		Eventually(configMapExists(ctx, cm)).Should(BeFalse())
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("TargetCount", int32(0)))

		By("annotations changed: on again")
		update(ctx, d, func(d *appsv1.Deployment) { d.Spec.Template.Annotations[v1beta1.AnnotationEnabled] = "true" })
		Eventually(configMapExists(ctx, cm)).Should(BeTrue())

		By("deleted")
		remove(ctx, d)
		Eventually(configMapExists(ctx, cm)).Should(BeFalse())
	})

	It("Deployment labels changed: selectors match or stop matching", func(ctx SpecContext) {
		create(ctx, flagSet(ns, "beta", "off"), source(ns, "beta-flags", []v1beta1.Source{fileRef("beta")}, withSelector("track", "beta")))
		d := deployment(ns, "web", map[string]string{"track": "stable"}, nil)
		create(ctx, d)
		cm := configMapOf(ns, ns, "beta")
		Consistently(configMapExists(ctx, cm)).Should(BeFalse())
		update(ctx, d, func(d *appsv1.Deployment) { d.Labels["track"] = "beta" })
		Eventually(configMapExists(ctx, cm)).Should(BeTrue())
		update(ctx, d, func(d *appsv1.Deployment) { d.Labels["track"] = "stable" })
		Eventually(configMapExists(ctx, cm)).Should(BeFalse())
	})

	It("Deployment scaled or restarted: nothing relevant, nothing written", func(ctx SpecContext) {
		d := deployment(ns, "web", nil, optIn)
		create(ctx, d)
		cm := configMapOf(ns, ns, "checkout")
		Eventually(configMapExists(ctx, cm)).Should(BeTrue())
		rv := resourceVersion(ctx, cm)
		update(ctx, d, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) })
		Consistently(func() string { return resourceVersion(ctx, cm) }).Should(Equal(rv))
	})

	It("StatefulSet and DaemonSet are targeted like Deployments", func(ctx SpecContext) {
		s := source(ns, "infra", []v1beta1.Source{fileRef("checkout")}, targeting("StatefulSet", "db"), targeting("DaemonSet", "agent"))
		create(ctx, s, statefulSet(ns, "db"), daemonSet(ns, "agent"))
		Eventually(sourceStatus(ctx, ns, "infra")).Should(HaveField("Targets", ConsistOf(
			v1beta1.WorkloadReference{Kind: "DaemonSet", Name: "agent"}, v1beta1.WorkloadReference{Kind: "StatefulSet", Name: "db"})))
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeTrue())

		remove(ctx, &appsv1.StatefulSet{ObjectMeta: objectMeta(ns, "db")})
		Eventually(sourceStatus(ctx, ns, "infra")).Should(HaveField("Targets", []v1beta1.WorkloadReference{{Kind: "DaemonSet", Name: "agent"}}))
		remove(ctx, &appsv1.DaemonSet{ObjectMeta: objectMeta(ns, "agent")})
		Eventually(configMapExists(ctx, configMapOf(ns, ns, "checkout"))).Should(BeFalse())
	})
})

func resourceVersion(ctx SpecContext, key client.ObjectKey) string {
	var obj = newConfigMap()
	Expect(k8s.Get(ctx, key, obj)).To(Succeed())
	return obj.ResourceVersion
}
