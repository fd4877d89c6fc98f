package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
)

var _ = Describe("rolloutOnChange", func() {
	It("rolls the workload when a sidecar setting changes: the new pod comes up Ready and serves with the new setting, the old one goes", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		src := source(ns, "flags", "web", fixtures.FileRef("checkout"), func(s *v1beta1.FeatureFlagSource) {
			s.Spec.RolloutOnChange = ptr.To(true)
		})
		create(ctx, flagSet(ns, "checkout", "off"), src, deployment(ns, "web", appImage, nil))
		old := readyPod(ctx, ns, "web")
		Eventually(resolve(flagdAddr(old))).Should(Equal(evaluated("off")))
		oldPID := pidOf(old, injection.SidecarName)

		By("moving flagd's evaluation port")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
				return err
			}
			src.Spec.Port = 8090
			return k8s.Update(ctx, src)
		}).Should(Succeed())

		next := successor(ctx, old)
		Expect(sidecarOf(next).Args).To(ContainElements("--port", "8090"))
		addr, ok := n.Addr(key(next), injection.SidecarName, 8090)
		Expect(ok).To(BeTrue(), "the new sidecar declares port 8090")
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))
		Eventually(func() error { return k8s.Get(ctx, key(old), old) }).Should(Satisfy(apierrors.IsNotFound))
		Eventually(processGone(oldPID)).Should(BeTrue(), "the old pod's flagd still runs")
		Eventually(eventsAbout(ctx, ns, "Deployment", "web")).Should(ContainElement(HaveField("Reason", workflows.EventRestarted)))
	})
})
