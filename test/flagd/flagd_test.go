package flagd

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
)

var _ = Describe("a Flagd of a file source", func() {
	It("serves its flag set over RPC and OFREP through its Service, and follows a flag edit", func(ctx SpecContext) {
		ns := newNamespace(ctx, "file")
		ff := flagSet(ns, "flags", "off")
		fd := newFlagd(ns, "flagd", "src")
		create(ctx, ff, source(ns, "src", fixtures.FileRef("flags")), fd)
		Eventually(getter(ctx, fd)).Should(beServing())
		Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
		Eventually(ofrepVariant(ctx, ns, "flagd")).Should(Equal("off"))

		By("editing the flag set")
		setVariant(ctx, ff, "on")
		Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("on"))
		Eventually(ofrepVariant(ctx, ns, "flagd")).Should(Equal("on"))
		_ = v1beta1.FlagdKind
	})
})
