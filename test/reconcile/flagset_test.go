package reconcile

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

var _ = Describe("FeatureFlag", func() {
	var (
		ns  string
		ff  *v1beta1.FeatureFlag
		src *v1beta1.FeatureFlagSource
		cm  client.ObjectKey
	)

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		ff = flagSet(ns, "checkout", "off")
		src = source(ns, "web-flags", []v1beta1.Source{fileRef("checkout")}, targeting("Deployment", "web"))
		create(ctx, ff, src, deployment(ns, "web", nil, nil))
		cm = configMapOf(ns, ns, "checkout")
		Eventually(flagContent(ctx, cm, ns, "checkout")).ShouldNot(BeEmpty())
	})

	It("created: renders a ConfigMap with the flagd JSON, labelled and owned, and reports status", func(ctx SpecContext) {
		got := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, cm, got)).To(Succeed())
		want, _, err := flagsets.Serve(ff)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Data).To(Equal(map[string]string{ns + "_checkout.flagd.json": want}))
		Expect(got.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "flagplane"))
		Expect(got.OwnerReferences).To(ConsistOf(HaveField("UID", ff.UID)))
		Expect(got.ManagedFields).To(ContainElement(HaveField("Manager", "flagplane")))

		Eventually(flagSetCondition(ctx, ns, "checkout", "Accepted")).Should(HavePrefix(statusTrue))
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(And(
			HaveField("Flags", int32(1)), HaveField("Sources", int32(1)), HaveField("Namespaces", []string{ns})))
	})

	It("spec changed: the ConfigMap follows every edit", func(ctx SpecContext) {
		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "on"
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		Eventually(func() string { return defaultVariantIn(flagContent(ctx, cm, ns, "checkout")()) }).Should(Equal("on"))

		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			f.Spec.FlagSpec.Flags["dark-mode"] = v1beta1.Flag{State: "DISABLED",
				Variants: json.RawMessage(`{"a":"x","b":"y"}`), DefaultVariant: "b"}
		})
		Eventually(flagContent(ctx, cm, ns, "checkout")).Should(ContainSubstring(`"dark-mode"`))
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(HaveField("Flags", int32(2)))
	})

	It("delivery: status records the revision served and which generated ConfigMaps hold it, an invalid edit showing as not delivered", func(ctx SpecContext) {
		revisionOf := func(f *v1beta1.FeatureFlag) string {
			content, err := flagsets.Render(f)
			Expect(err).NotTo(HaveOccurred())
			return flagsets.Revision(content)
		}
		first := revisionOf(ff)
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(And(HaveField("Revision", first), HaveField("Delivered", "1/1"),
			HaveField("Consumers", ConsistOf(And(HaveField("Kind", "ConfigMap"), HaveField("Namespace", ns), HaveField("Name", cm.Name),
				HaveField("Revision", first), HaveField("Since", Not(BeNil())))))))

		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "on"
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		second := revisionOf(ff)
		Expect(second).NotTo(Equal(first))
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(And(HaveField("Revision", second), HaveField("Delivered", "1/1"),
			HaveField("Consumers", ConsistOf(HaveField("Revision", second)))))

		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "maybe" // not a variant: flagd cannot load it
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		Eventually(flagSetStatus(ctx, ns, "checkout")).Should(And(HaveField("Revision", revisionOf(ff)), HaveField("Delivered", "0/1"),
			HaveField("Consumers", ConsistOf(HaveField("Revision", second)))), "the ConfigMap keeps the last valid content, and status says so")
	})

	It("spec changed to invalid: the ConfigMap keeps the last good content and status says why", func(ctx SpecContext) {
		good := flagContent(ctx, cm, ns, "checkout")()
		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "purple"
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		Eventually(flagSetCondition(ctx, ns, "checkout", "Accepted")).Should(And(
			HavePrefix("False/Invalid"), ContainSubstring(`defaultVariant: Invalid value: "purple"`)))
		Eventually(sourceCondition(ctx, ns, "web-flags", "Programmed")).Should(And(
			HavePrefix("False/Pending"), ContainSubstring("keeps the last valid content")))
		Consistently(flagContent(ctx, cm, ns, "checkout")).Should(Equal(good))
		Eventually(warningReasons(ctx, ns, "checkout")).Should(ContainElement("InvalidFlagSet"))

		By("fixing it, the ConfigMap follows again")
		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.DefaultVariant = "on"
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		Eventually(func() string { return defaultVariantIn(flagContent(ctx, cm, ns, "checkout")()) }).Should(Equal("on"))
		Eventually(sourceCondition(ctx, ns, "web-flags", "Programmed")).Should(HavePrefix(statusTrue))
	})

	It("while invalid, a namespace that starts consuming it gets the last valid content", func(ctx SpecContext) {
		good := flagContent(ctx, cm, ns, "checkout")()
		update(ctx, ff, func(f *v1beta1.FeatureFlag) {
			fl := f.Spec.FlagSpec.Flags["new-checkout"]
			fl.Variants = json.RawMessage(`{"on":true,"off":"no"}`)
			f.Spec.FlagSpec.Flags["new-checkout"] = fl
		})
		Eventually(flagSetCondition(ctx, ns, "checkout", "Accepted")).Should(HavePrefix("False/Invalid"))

		team := newNamespace(ctx)
		create(ctx, referenceGrant(ns, "team", team, "checkout"), deployment(team, "web", nil, nil),
			source(team, "flags", []v1beta1.Source{fileRef(ns + "/checkout")}, targeting("Deployment", "web")))
		Eventually(flagContent(ctx, configMapOf(team, ns, "checkout"), ns, "checkout")).Should(Equal(good))
	})

	It("status or metadata changed: nothing is written", func(ctx SpecContext) {
		Eventually(sourceCondition(ctx, ns, "web-flags", "Programmed")).Should(HavePrefix(statusTrue))
		before := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, cm, before)).To(Succeed())
		update(ctx, ff, func(f *v1beta1.FeatureFlag) { f.Labels = map[string]string{"team": "checkout"} })
		Consistently(func() string {
			now := &corev1.ConfigMap{}
			Expect(k8s.Get(ctx, cm, now)).To(Succeed())
			return now.ResourceVersion
		}).Should(Equal(before.ResourceVersion))
	})

	It("deleted: its ConfigMap goes, and the source names the missing flag set", func(ctx SpecContext) {
		remove(ctx, ff)
		Eventually(configMapExists(ctx, cm)).Should(BeFalse())
		Eventually(sourceCondition(ctx, ns, "web-flags", "ResolvedRefs")).Should(Equal(
			"False/FlagSetNotFound: sources[0]: FeatureFlag " + ns + "/checkout not found"))
		Eventually(sourceCondition(ctx, ns, "web-flags", "Programmed")).Should(HavePrefix("False/UnresolvedRefs"),
			"not ready: its workload does not get the flag set")

		By("created again, it is rendered again")
		create(ctx, flagSet(ns, "checkout", "on"))
		Eventually(func() string { return defaultVariantIn(flagContent(ctx, cm, ns, "checkout")()) }).Should(Equal("on"))
		Eventually(sourceCondition(ctx, ns, "web-flags", "ResolvedRefs")).Should(HavePrefix(statusTrue))
		Eventually(sourceCondition(ctx, ns, "web-flags", "Programmed")).Should(HavePrefix(statusTrue))
	})
})
