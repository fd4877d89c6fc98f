package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

var _ = Describe("rolloutOnChange", func() {
	It("restarts every kind of targeted workload when its injected configuration changes, and only then", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		workloads := []client.Object{deployment(ns, "web", nil, nil), statefulSet(ns, "db"), daemonSet(ns, "agent")}
		src := source(ns, "flags", []v1beta1.Source{fileRef("checkout")},
			targeting("Deployment", "web"), targeting("StatefulSet", "db"), targeting("DaemonSet", "agent"),
			func(s *v1beta1.FeatureFlagSource) { s.Spec.RolloutOnChange = ptr.To(true) })
		ff := flagSet(ns, "checkout", "on")
		create(ctx, ff, src)
		create(ctx, workloads...)
		Eventually(sourceStatus(ctx, ns, "flags")).Should(HaveField("TargetCount", int32(3)))
		for _, w := range workloads {
			Consistently(restartedAt(ctx, w), "1s").Should(BeEmpty(), "a new workload is not restarted")
		}

		By("a flag edit reaches the pods through the mounted file: no restart")
		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "off"
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		Consistently(restartedAt(ctx, workloads[0]), "1s").Should(BeEmpty())

		By("a sidecar setting changes: every workload restarts")
		update(ctx, src, func(s *v1beta1.FeatureFlagSource) { s.Spec.DebugLogging = ptr.To(true) })
		for _, w := range workloads {
			Eventually(restartedAt(ctx, w)).ShouldNot(BeEmpty(), "%T %s", w, w.GetName())
		}
	})
})
