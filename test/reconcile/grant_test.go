package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

var _ = Describe("ReferenceGrant", func() {
	It("added and removed: a cross-namespace reference resolves only while granted", func(ctx SpecContext) {
		flags, team := newNamespace(ctx), newNamespace(ctx)
		create(ctx, flagSet(flags, "shared", "on"), deployment(team, "web", nil, nil),
			source(team, "flags", []v1beta1.Source{fileRef(flags + "/shared")}, targeting("Deployment", "web")))
		cm := configMapOf(team, flags, "shared")
		Eventually(sourceCondition(ctx, team, "flags", "ResolvedRefs")).Should(Equal(
			"False/RefNotPermitted: sources[0]: FeatureFlag " + flags + "/shared is in another namespace and no ReferenceGrant in " + flags + " permits it"))
		Consistently(configMapExists(ctx, cm)).Should(BeFalse())

		By("a grant for another flag set does not help")
		create(ctx, referenceGrant(flags, "other", team, "not-shared"))
		Consistently(configMapExists(ctx, cm)).Should(BeFalse())

		By("a grant for it resolves the reference")
		grant := referenceGrant(flags, "team", team, "shared")
		create(ctx, grant)
		Eventually(configMapExists(ctx, cm)).Should(BeTrue())
		Eventually(sourceCondition(ctx, team, "flags", "ResolvedRefs")).Should(HavePrefix(statusTrue))
		Eventually(flagContent(ctx, cm, flags, "shared")).Should(ContainSubstring("new-checkout"))

		By("removing the grant unresolves it and removes the copy")
		remove(ctx, grant)
		Eventually(configMapExists(ctx, cm)).Should(BeFalse())
		Eventually(sourceCondition(ctx, team, "flags", "ResolvedRefs")).Should(HavePrefix("False/RefNotPermitted"))
	})
})
