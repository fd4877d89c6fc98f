package admission

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// rolloutOnChange compares a workload's running pods (the injection the
// webhook gave them) with what they would get now, so these specs need the
// webhook: the other suites' pods have no injection.
var _ = Describe("rolloutOnChange", func() {
	withRollout := func(s *v1beta1.FeatureFlagSource) { s.Spec.RolloutOnChange = ptr.To(true) }

	It("restarts Deployments and StatefulSets whose pods got another injection than they would get now, and only then", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		workloads := []client.Object{deployment(ns, "web", nil, nil), statefulSet(ns, "db")}
		src := source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web"), targeting("StatefulSet", "db"), withRollout)
		ff := flagSet(ns, "checkout")
		create(ctx, ff, src)
		create(ctx, workloads...)
		for _, app := range []string{"web", "db"} {
			Eventually(pods(ctx, ns, app)).Should(ContainElement(HaveSidecar()), app)
		}
		for _, w := range workloads {
			Consistently(restartedAt(ctx, w), "1s").Should(BeEmpty(), "pods that have what they should are not restarted")
		}

		By("a flag edit reaches the pods through the mounted file: no restart")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
		fl := ff.Spec.FlagSpec.Flags["new-checkout"]
		fl.DefaultVariant = "on"
		ff.Spec.FlagSpec.Flags["new-checkout"] = fl
		Expect(k8s.Update(ctx, ff)).To(Succeed())
		Consistently(restartedAt(ctx, workloads[0]), "1s").Should(BeEmpty())

		By("a sidecar setting changes: both restart")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), src)).To(Succeed())
		src.Spec.DebugLogging = ptr.To(true)
		Expect(k8s.Update(ctx, src)).To(Succeed())
		for _, w := range workloads {
			Eventually(restartedAt(ctx, w)).ShouldNot(BeEmpty(), "%T %s", w, w.GetName())
		}
	})

	It("follows an edit of nothing but the source's securityContext annotation", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, nil)
		src := source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web"), withRollout)
		create(ctx, flagSet(ns, "checkout"), src, web)
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(HaveSidecar()))

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), src)).To(Succeed())
		src.Annotations = map[string]string{injection.AnnotationSidecarSecurityContext: `{"runAsUser": 1000, "runAsGroup": 1000}`}
		Expect(k8s.Update(ctx, src)).To(Succeed())
		Eventually(restartedAt(ctx, web)).ShouldNot(BeEmpty(), "metadata, but the injection reads it")
		Eventually(func() []*int64 {
			var uids []*int64
			for _, p := range pods(ctx, ns, "web")() {
				if c := sidecar(p); c != nil && p.DeletionTimestamp == nil {
					uids = append(uids, c.SecurityContext.RunAsUser)
				}
			}
			return uids
		}).Should(ContainElement(HaveValue(Equal(int64(1000)))))
	})

	It("restarts pods that a rolloutOnChange source no longer applies to", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, nil)
		src := source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web"), withRollout)
		create(ctx, flagSet(ns, "checkout"), src, web)
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(And(HaveSidecar(),
			HaveField("Annotations", HaveKeyWithValue(restarts.AnnotationRolloutOnChange, "true")))))
		Expect(k8s.Delete(ctx, src)).To(Succeed())
		Eventually(restartedAt(ctx, web)).ShouldNot(BeEmpty(), "the pods asked for it when they were admitted")
	})
})

// Serial: it stops the operator that the other specs rely on.
var _ = Describe("rolloutOnChange across a restart of the operator", Serial, func() {
	It("compares with the pods, not with memory: nothing restarts when nothing changed; pods admitted with another injection restart", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, nil)
		src := source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web"),
			func(s *v1beta1.FeatureFlagSource) { s.Spec.RolloutOnChange = ptr.To(true) })
		create(ctx, flagSet(ns, "checkout"), src, web)
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(HaveSidecar()))

		By("a restart of the operator with nothing changed restarts nothing")
		operator.stop()
		operator = startOperator()
		Consistently(restartedAt(ctx, web), "2s").Should(BeEmpty())

		By("while the operator is down, its pod comes to carry another injection than the workload's now")
		// The FeatureFlagSource validator fails closed, so the source cannot
		// change while no operator runs; a pod admitted by an operator of an
		// older configuration looks like this.
		operator.stop()
		pod := pods(ctx, ns, "web")()[0]
		pod.Annotations[restarts.AnnotationInjection] = "admitted-with-an-older-configuration"
		Expect(k8s.Update(ctx, &pod)).To(Succeed())
		operator = startOperator()
		Eventually(restartedAt(ctx, web)).ShouldNot(BeEmpty(), "the first pass of the new operator rolls it")
	})
})

func restartedAt(ctx context.Context, obj client.Object) func() string {
	return func() string {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		var tmpl *corev1.PodTemplateSpec
		switch o := obj.(type) {
		case *appsv1.Deployment:
			tmpl = &o.Spec.Template
		case *appsv1.StatefulSet:
			tmpl = &o.Spec.Template
		}
		return tmpl.Annotations[restarts.RestartedAtAnnotation]
	}
}
