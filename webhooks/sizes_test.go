package webhooks

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// largeFlagSet is a valid flag set of 2,500 flags, some 1.2 MB rendered:
// more than a ConfigMap holds, less than a sync message carries.
func largeFlagSet(namespace, name string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	description := strings.Repeat("d", 400)
	for i := range 2500 {
		ff.Spec.FlagSpec.Flags[fmt.Sprintf("flag-%05d", i)] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, DefaultVariant: "off",
			Variants: []byte(`{"on":true,"off":false}`), Metadata: []byte(`{"description":"` + description + `"}`)}
	}
	return ff
}

// renderingGraph is the graph of blastManifests, rendered as the manager
// renders it (sizes included).
func renderingGraph(t *testing.T) *staticGraph {
	t.Helper()
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	if err := manifests.Load(topo, strings.NewReader(blastManifests)); err != nil {
		t.Fatal(err)
	}
	return &staticGraph{topo: topo, built: true}
}

func sizeOf(ff *v1beta1.FeatureFlag) int {
	content, _, _ := flagsets.Serve(ff)
	return len(content)
}

// TestFlagSetTooLargeForAConfigMap: a FeatureFlag larger than a ConfigMap
// holds is admitted with a warning that names its size, the limit and the
// providers that can carry it, unless the graph shows consumers that read
// it with the file provider: then it is refused, with the reason, the
// limit and those consumers. With validation off it is a warning.
func TestFlagSetTooLargeForAConfigMap(t *testing.T) {
	limitWords := func(name string, size int) string {
		return fmt.Sprintf("flag set shop/%s is %d bytes rendered for flagd, more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold: "+
			"the file provider cannot deliver it; deliver it with provider flagd-proxy (the sync server, up to 4194304 bytes) or kubernetes, "+
			"or split it into smaller FeatureFlags", name, size)
	}
	other := largeFlagSet("shop", "other")
	size := sizeOf(other)

	t.Run("no graph yet: a warning", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{}).Handle(t.Context(), admissionOf(t, admissionv1.Create, other, nil))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Warnings).To(ContainElement("flagplane: " + limitWords("other", size)))
	})

	t.Run("no consumer reads it: a warning, and what it reaches", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{Graph: renderingGraph(t)}).Handle(t.Context(), admissionOf(t, admissionv1.Create, other, nil))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Warnings).To(ConsistOf("flagplane: "+limitWords("other", size),
			"flagplane: no FeatureFlagSource uses this flag set: it reaches no workload"))
	})

	grown := largeFlagSet("shop", "flags")
	t.Run("consumers read it with the file provider: refused", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{Graph: renderingGraph(t)}).Handle(t.Context(), admissionOf(t, admissionv1.Update, grown, &v1beta1.FeatureFlag{}))
		g.Expect(resp.Allowed).To(BeFalse())
		g.Expect(resp.Result.Reason).To(BeEquivalentTo(metav1.StatusReasonInvalid))
		g.Expect(resp.Result.Details.Causes).To(ConsistOf(HaveField("Type", BeEquivalentTo(field.ErrorTypeTooLong))))
		g.Expect(resp.Result.Message).To(Equal(`FeatureFlag.core.openfeature.dev "flags" is invalid: spec.flagSpec: Too long: ` +
			limitWords("flags", sizeOf(grown)) + "; 2 workloads read it with the file provider and would keep its last content: " +
			"Deployment shop/web-1, Deployment shop/web-2"))
	})

	t.Run("validation off: a warning", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{Graph: renderingGraph(t), Disabled: true}).Handle(t.Context(), admissionOf(t, admissionv1.Update, grown, &v1beta1.FeatureFlag{}))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Warnings).To(ContainElement(HavePrefix("flagplane: " + limitWords("flags", sizeOf(grown)) + "; 2 workloads read it")))
	})
}

// TestSourceTooLarge: a source that would deliver a flag set with a
// provider too small for it is refused, naming the entry, the flag set,
// its size and the limit; the sync server and the kubernetes provider can
// carry it. One that delivered it so already (the flag set grew while
// admission was off) gets a warning on an edit, not a refusal; a flag set
// it may not read is not sized for it.
func TestSourceTooLarge(t *testing.T) {
	graph := renderingGraph(t)
	big := largeFlagSet("shop", "big")
	if _, err := graph.topo.UpsertFlagSet(big); err != nil {
		t.Fatal(err)
	}
	s := &SourceValidator{Graph: graph}
	source := func(ns, name string, provider v1beta1.SyncProviderType, ref string) *v1beta1.FeatureFlagSource {
		return &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1beta1.FeatureFlagSourceSpec{Sources: []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderKubernetes}, {Source: ref, Provider: provider}}}}
	}

	g := NewWithT(t)
	resp := s.Handle(t.Context(), admissionOf(t, admissionv1.Create, source("shop", "new", v1beta1.SyncProviderFile, "big"), nil))
	g.Expect(resp.Allowed).To(BeFalse())
	g.Expect(resp.Result.Message).To(Equal(fmt.Sprintf(`FeatureFlagSource.core.openfeature.dev "new" is invalid: spec.sources[1].source: Too long: `+
		"flag set shop/big is %d bytes rendered for flagd, more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold: "+
		"the file provider cannot deliver it; deliver it with provider flagd-proxy (the sync server, up to 4194304 bytes) or kubernetes, "+
		"or split it into smaller FeatureFlags; this entry could never deliver it", sizeOf(big))))

	for _, p := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFlagdProxy, v1beta1.SyncProviderKubernetes} {
		resp = s.Handle(t.Context(), admissionOf(t, admissionv1.Create, source("shop", "new", p, "big"), nil))
		g.Expect(resp.Allowed).To(BeTrue(), string(p))
		g.Expect(resp.Warnings).To(ConsistOf(HavePrefix("flagplane: this source reaches")), string(p))
	}

	By := "a flag set of another namespace, without a grant: not delivered, not sized"
	resp = s.Handle(t.Context(), admissionOf(t, admissionv1.Create, source("team", "new", v1beta1.SyncProviderFile, "shop/big"), nil))
	g.Expect(resp.Allowed).To(BeTrue(), By)
	g.Expect(strings.Join(resp.Warnings, "\n")).NotTo(ContainSubstring("bytes"), By)

	// shop/web delivers shop/flags with the file provider; shop/flags grew
	// past a ConfigMap while admission was off.
	grown := largeFlagSet("shop", "flags")
	if _, err := graph.topo.UpsertFlagSet(grown); err != nil {
		t.Fatal(err)
	}
	web, _ := graph.topo.Snapshot().Source(topology.SourceKey("shop", "web"))
	edited := web.DeepCopy()
	edited.Spec.RolloutOnChange = nil
	resp = s.Handle(t.Context(), admissionOf(t, admissionv1.Update, edited, web))
	g.Expect(resp.Allowed).To(BeTrue(), "an edit that does not make the overflow")
	g.Expect(resp.Warnings).To(ContainElement(fmt.Sprintf("flagplane: spec.sources[0]: flag set shop/flags is %d bytes rendered for flagd, "+
		"more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold: the file provider cannot deliver it; "+
		"deliver it with provider flagd-proxy (the sync server, up to 4194304 bytes) or kubernetes, or split it into smaller FeatureFlags", sizeOf(grown))))
}
