package topology

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// A flag set is rendered once per spec the topology takes, whatever reads
// it afterwards and however many objects carry that spec.
func TestFlagSetRenderedOncePerEdit(t *testing.T) {
	g := NewWithT(t)
	renders := 0
	top := New(WithFlagSetRendering(func(ff *v1beta1.FeatureFlag) Rendered {
		renders++
		r := propRender(ff)
		r.Warnings = []string{fmt.Sprint("render ", renders)}
		return r
	}))
	k := fsK("shop", "flags")
	ff := newFlagSet("shop", "flags", "on")
	_, err := top.UpsertFlagSet(ff)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renders).To(Equal(1))

	v := top.Snapshot()
	r, ok := v.FlagSetRendered(k)
	g.Expect(ok).To(BeTrue())
	g.Expect(r).To(Equal(Rendered{Content: "new-ui=on;", Revision: "a", Warnings: []string{"render 1"}}))
	g.Expect(v.FlagSetValid(k)).To(BeTrue())

	// A copy, as a cache's reader gets it: the graph's rendering.
	got, ok := v.RenderedOf(ff.DeepCopy())
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(r))
	g.Expect(v.RenderFlagSet(ff.DeepCopy())).To(Equal(r))
	g.Expect(renders).To(Equal(1))

	// Metadata and status changes carry the spec the graph rendered.
	labelled := ff.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	labelled.Status.Flags = 1
	_, err = top.UpsertFlagSet(labelled)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renders).To(Equal(1))

	// An edit: rendered once, and the views taken before keep theirs.
	broken := newFlagSet("shop", "flags", "broken")
	_, err = top.UpsertFlagSet(broken)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renders).To(Equal(2))
	after := top.Snapshot()
	r2, _ := after.FlagSetRendered(k)
	g.Expect(r2.Err).To(MatchError(ContainSubstring("broken")))
	g.Expect(r2.Content).To(Equal("new-ui=broken;"))
	g.Expect(after.FlagSetValid(k)).To(BeFalse())
	r1, _ := v.FlagSetRendered(k)
	g.Expect(r1).To(Equal(r))

	// An object newer than the view is rendered when asked, and not kept.
	_, ok = v.RenderedOf(broken)
	g.Expect(ok).To(BeFalse())
	g.Expect(v.RenderFlagSet(broken).Content).To(Equal("new-ui=broken;"))
	g.Expect(renders).To(Equal(3))
	r1, _ = v.FlagSetRendered(k)
	g.Expect(r1).To(Equal(r))

	top.DeleteFlagSet("shop", "flags")
	_, ok = top.Snapshot().FlagSetRendered(k)
	g.Expect(ok).To(BeFalse())
	_, ok = top.Snapshot().RenderedOf(ff)
	g.Expect(ok).To(BeFalse())
}

// Without a rendering function every flag set is valid and renders to
// nothing.
func TestFlagSetRenderedWithoutRendering(t *testing.T) {
	g := NewWithT(t)
	top := New()
	_, err := top.UpsertFlagSet(newFlagSet("shop", "flags", "broken"))
	g.Expect(err).NotTo(HaveOccurred())
	v := top.Snapshot()
	r, ok := v.FlagSetRendered(fsK("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	g.Expect(r).To(Equal(Rendered{}))
	g.Expect(v.FlagSetValid(fsK("shop", "flags"))).To(BeTrue())
}

// Each delivery mode's limit, on the figure it counts: a ConfigMap holds
// up to ConfigMapMaxBytes of content, a sync message up to
// SyncMaxMessageBytes including its framing; the kubernetes provider has
// no limit of its own, and what is not served overflows nothing.
func TestOverflow(t *testing.T) {
	g := NewWithT(t)
	sized := func(n int) Rendered {
		return Rendered{Content: string(make([]byte, n)), Size: n}
	}
	file, proxy, kube := string(v1beta1.SyncProviderFile), string(v1beta1.SyncProviderFlagdProxy), string(v1beta1.SyncProviderKubernetes)

	_, over := sized(ConfigMapMaxBytes).Overflow(file)
	g.Expect(over).To(BeFalse(), "exactly 1 MiB fits: the API server refuses more than its limit")
	o, over := sized(ConfigMapMaxBytes + 1).Overflow(file)
	g.Expect(over).To(BeTrue())
	g.Expect(o).To(Equal(Overflow{Provider: v1beta1.SyncProviderFile, Size: ConfigMapMaxBytes + 1, Limit: ConfigMapMaxBytes}))
	g.Expect(o.Message(fsK("shop", "big"))).To(Equal("flag set shop/big is 1048577 bytes rendered for flagd, more than the 1048576 bytes (1 MiB) " +
		"the API server lets a ConfigMap hold: the file provider cannot deliver it; deliver it with provider flagd-proxy " +
		"(the sync server, up to 4194304 bytes) or kubernetes, or split it into smaller FeatureFlags"))

	// A message of n bytes of content has 1 byte of tag and 4 of length
	// at these sizes.
	g.Expect(sized(SyncMaxMessageBytes - 5).SyncMessageSize()).To(Equal(SyncMaxMessageBytes))
	_, over = sized(SyncMaxMessageBytes - 5).Overflow(proxy)
	g.Expect(over).To(BeFalse())
	o, over = sized(SyncMaxMessageBytes - 4).Overflow(proxy)
	g.Expect(over).To(BeTrue())
	g.Expect(o.Size).To(Equal(SyncMaxMessageBytes + 1))
	g.Expect(o.Message(fsK("shop", "big"))).To(ContainSubstring("deliver it with provider kubernetes"))

	_, over = sized(SyncMaxMessageBytes).Overflow(kube)
	g.Expect(over).To(BeFalse(), "flagd reads the stored FeatureFlag")
	invalid := sized(SyncMaxMessageBytes)
	invalid.Err = fmt.Errorf("broken")
	_, over = invalid.Overflow(file)
	g.Expect(over).To(BeFalse(), "an invalid flag set is not served at all")
	_, over = Rendered{}.Overflow(file)
	g.Expect(over).To(BeFalse())
}
