package topology

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestFitName(t *testing.T) {
	ns63 := strings.Repeat("n", 63)
	name253 := strings.Repeat("a", 250) + ".bc"
	for _, tc := range []struct {
		title                         string
		prefix, ns, sep, name, suffix string
		limit                         int
		want                          string // "" for a shortened form, checked below
	}{
		{title: "fits", prefix: "flagd.", ns: "shop", sep: ".", name: "flags", limit: 253, want: "flagd.shop.flags"},
		{title: "fits to the byte", ns: "a", sep: "_", name: strings.Repeat("b", 253), suffix: "", limit: 255, want: "a_" + strings.Repeat("b", 253)},
		{title: "one byte over", ns: "ab", sep: "_", name: strings.Repeat("b", 253), limit: 255},
		{title: "longest, with a suffix", ns: ns63, sep: "_", name: name253, suffix: ".flagd.json", limit: 253},
		{title: "longest, dots as dashes", prefix: "flagd.", ns: ns63, sep: ".", name: name253, limit: 253},
		{title: "cut on a dot", prefix: "flagd.", ns: "ns", sep: ".", name: strings.Repeat("x", 227) + "." + strings.Repeat("y", 30), limit: 253},
		{title: "cut in a run of dashes", prefix: "flagd.", ns: "ns", sep: ".", name: "x" + strings.Repeat("-", 250) + "y", limit: 253},
	} {
		t.Run(tc.title, func(t *testing.T) {
			g := NewWithT(t)
			got := FitName(tc.prefix, tc.ns, tc.sep, tc.name, tc.suffix, tc.limit)
			g.Expect(len(got)).To(BeNumerically("<=", tc.limit))
			if tc.want != "" {
				g.Expect(got).To(Equal(tc.want))
				return
			}
			g.Expect(got).To(HavePrefix(tc.prefix + tc.ns + "-"))
			g.Expect(got).To(HaveSuffix(tc.suffix))
			middle := strings.TrimSuffix(strings.TrimPrefix(got, tc.prefix), tc.suffix)
			g.Expect(middle).NotTo(ContainSubstring(tc.sep), "no plain form is shortened")
			g.Expect(middle).To(MatchRegexp(`[a-z0-9]-[0-9a-f]{16}$`))
			if tc.sep == "." {
				g.Expect(validation.IsDNS1123Subdomain(got)).To(BeEmpty())
			} else {
				g.Expect(got).To(MatchRegexp(`^[-._a-z0-9]+$`), "the characters of a ConfigMap key")
			}
			g.Expect(FitName(tc.prefix, tc.ns, tc.sep, tc.name+"z", tc.suffix, tc.limit)).NotTo(Equal(got), "a name that differs past the cut")
		})
	}
}

func TestFlagSetNames(t *testing.T) {
	g := NewWithT(t)
	// The OpenFeature Operator's forms wherever they fit.
	f := FlagSetKey("shop", "flags.v2")
	g.Expect(ConfigMapName(f)).To(Equal("flagd.shop.flags.v2"))
	g.Expect(ConfigMapDataKey(f)).To(Equal("shop_flags.v2.flagd.json"))
	g.Expect(FlagSetID(f)).To(Equal("shop_flags.v2"))

	// A data key fits up to 253 characters, an ID (a directory) up to 255.
	ns, name := strings.Repeat("n", 63), strings.Repeat("f", 178)
	g.Expect(ConfigMapDataKey(FlagSetKey(ns, name))).To(Equal(ns + "_" + name + ".flagd.json"))
	g.Expect(ConfigMapDataKey(FlagSetKey(ns, name+"f"))).To(HaveSuffix(".flagd.json"))
	g.Expect(ConfigMapDataKey(FlagSetKey(ns, name+"f"))).NotTo(ContainSubstring("_"))
	name = strings.Repeat("f", 191)
	g.Expect(FlagSetID(FlagSetKey(ns, name))).To(Equal(ns + "_" + name))
	g.Expect(FlagSetID(FlagSetKey(ns, name+"f"))).To(HaveLen(FileNameMaxLength))
}
