package syncserver

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/metadata"

	"github.com/flagplane/flagplane/topology"
)

func TestParseSelector(t *testing.T) {
	for _, tc := range []struct {
		selector string
		want     topology.Key
		err      string
	}{
		{selector: "core.openfeature.dev/shop/checkout", want: topology.FlagSetKey("shop", "checkout")},
		{selector: "core.openfeature.dev/shop/checkout.v2", want: topology.FlagSetKey("shop", "checkout.v2")},
		{selector: "", err: "does not start with"},
		{selector: "shop/checkout", err: "does not start with"},
		{selector: "flagSetId=shop_checkout", err: "does not start with"},
		{selector: "core.openfeature.dev/shop", err: "names no FeatureFlag"},
		{selector: "core.openfeature.dev//checkout", err: "namespace"},
		{selector: "core.openfeature.dev/shop/", err: "name"},
		{selector: "core.openfeature.dev/Shop/checkout", err: "namespace"},
		{selector: "core.openfeature.dev/shop/a/b", err: "name"},
		{selector: "core.openfeature.dev/../checkout", err: "namespace"},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseSelector(tc.selector)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			g.Expect(Selector(got)).To(Equal(tc.selector))
		})
	}
}

func TestRequestSelectorPrefersTheHeader(t *testing.T) {
	g := NewWithT(t)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("Flagd-Selector", "core.openfeature.dev/a/header"))
	g.Expect(requestSelector(ctx, "core.openfeature.dev/a/body")).To(Equal("core.openfeature.dev/a/header"))
	g.Expect(requestSelector(context.Background(), "core.openfeature.dev/a/body")).To(Equal("core.openfeature.dev/a/body"))
	empty := metadata.NewIncomingContext(context.Background(), metadata.Pairs("flagd-selector", ""))
	g.Expect(requestSelector(empty, "core.openfeature.dev/a/body")).To(Equal("core.openfeature.dev/a/body"))
}

// FuzzParseSelector: parsing never panics, and what parses names exactly the
// flag set whose selector it is, so no selector reaches another one.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"core.openfeature.dev/shop/checkout", "core.openfeature.dev/a/b/c", "core.openfeature.dev//", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseSelector(s)
		if err != nil {
			return
		}
		if got := Selector(k); got != s {
			t.Fatalf("ParseSelector(%q) = %v, whose selector is %q", s, k, got)
		}
	})
}

func TestSidecarSource(t *testing.T) {
	g := NewWithT(t)
	checkout := topology.FlagSetKey("shop", "checkout")
	uri, sel := SidecarSource(checkout, SidecarOptions{Host: "flagplane-sync.flagplane-system.svc"})
	g.Expect(uri).To(Equal("flagplane-sync.flagplane-system.svc:8015"), "flagd's --sources takes host:port, no scheme")
	g.Expect(sel).To(Equal("core.openfeature.dev/shop/checkout"))
	uri, _ = SidecarSource(checkout, SidecarOptions{Host: "::1", Port: 9000})
	g.Expect(uri).To(Equal("[::1]:9000"))
	g.Expect(SidecarHeaders("t")).To(Equal(map[string]string{"authorization": "Bearer t"}))
}
