package topology

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// ConfigMapFacts answers, in one value, all a ConfigMap's writer asks,
// the other namespaces' copies (where a new copy takes an existing one's
// content when its own cannot be written) among them.
func TestConfigMapFacts(t *testing.T) {
	g := NewWithT(t)
	top := New(WithFlagSetRendering(propRender))
	team := fsK("team", "shared")
	for _, s := range []step{
		upsert(newFlagSet("team", "shared", "on")),
		upsert(flagSetGrant("team", "all", []string{"shop", "pay"}, "shared")),
		upsert(podGrant("team", "all-pods", []string{"shop", "pay"}, KindSource, "billing")),
		upsert(newSource("team", "billing", ref("shared", ""))),
		upsert(deployment("shop", "web", nil, optIn("team/billing"))),
		upsert(deployment("pay", "api", nil, optIn("team/billing"))),
		upsert(deployment("team", "own", nil, optIn("billing"))),
	} {
		must(t)(s(top))
	}
	v := top.Snapshot()
	g.Expect(v.ConsumerNamespaces(team)).To(Equal([]string{"pay", "shop", "team"}))

	shop := v.ConfigMapFacts(cmK(team, "shop"))
	g.Expect(shop.Needed).To(BeTrue())
	g.Expect(shop.Name).To(Equal(ConfigMapName(team)))
	g.Expect(shop.DataKey).To(Equal(ConfigMapDataKey(team)))
	g.Expect(shop.FlagSet).NotTo(BeNil())
	g.Expect(shop.Served.Content).To(Equal("new-ui=on;"))
	g.Expect(shop.Overflow).To(BeNil())
	g.Expect(shop.Copies()).To(Equal([]string{"pay", "team"}), "the other namespaces")

	gone := v.ConfigMapFacts(cmK(team, "elsewhere"))
	g.Expect(gone.Needed).To(BeFalse(), "no workload mounts it")
	g.Expect(gone.Name).To(BeEmpty())
	g.Expect(gone.FlagSet).To(BeNil())
	g.Expect(gone.Copies()).To(BeEmpty())

	for variant, check := range map[string]func(ConfigMapFacts){
		"broken": func(f ConfigMapFacts) { g.Expect(f.Served.Err).To(HaveOccurred()) },
		"huge": func(f ConfigMapFacts) {
			g.Expect(f.Overflow).NotTo(BeNil())
			g.Expect(f.Overflow.Provider).To(Equal(v1beta1.SyncProviderFile))
		},
	} {
		must(t)(upsert(newFlagSet("team", "shared", variant))(top))
		f := top.Snapshot().ConfigMapFacts(cmK(team, "shop"))
		check(f)
		g.Expect(f.Copies()).To(Equal([]string{"pay", "team"}), "%s: the other namespaces, for the last valid copy", variant)
	}
}
