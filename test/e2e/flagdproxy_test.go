package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/topology"
)

var _ = Describe("the flagd-proxy provider", func() {
	It("streams the flag set from flagplane's sync server to flagd, which presents the namespace token admission gave it; deleting the FeatureFlag empties the flag set", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "off")
		create(ctx, ff, source(ns, "flags", "web", v1beta1.Source{Source: "checkout", Provider: v1beta1.SyncProviderFlagdProxy}),
			deployment(ns, "web", appImage, nil))

		pod := readyPod(ctx, ns, "web")
		Expect(sidecarOf(pod).Args).To(ContainElement(And(
			ContainSubstring(`"uri":"`+op.SyncAddress+`"`),
			ContainSubstring(`"selector":"`+syncserver.Selector(topology.FlagSetKey(ns, "checkout"))+`"`))))
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("editing the FeatureFlag: pushed by the sync server")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))

		By("deleting the FeatureFlag: the sync server serves the flag set as empty")
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(resolve(addr)).Should(HaveField("Code", "not_found"))
		staysAsAdmitted(ctx, pod)
	})
})
