package topology

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestProviderInForce is the one rule for the provider of a spec.sources
// entry (the graph, the injection, the status and the webhook use it).
func TestProviderInForce(t *testing.T) {
	const (
		file       = v1beta1.SyncProviderFile
		kubernetes = v1beta1.SyncProviderKubernetes
		http       = v1beta1.SyncProviderHTTP
		proxy      = v1beta1.SyncProviderFlagdProxy
	)
	for _, tc := range []struct {
		name                          string
		entry, source, operator, want v1beta1.SyncProviderType
	}{
		{name: "nothing set: file", want: file},
		{name: "the operator's default", operator: kubernetes, want: kubernetes},
		{name: "the source's default over the operator's", source: proxy, operator: kubernetes, want: proxy},
		{name: "the entry's own over both", entry: http, source: proxy, operator: kubernetes, want: http},
		{name: "the entry's own over the operator's", entry: file, operator: kubernetes, want: file},
		{name: "the entry's own over the source's", entry: kubernetes, source: file, want: kubernetes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(ProviderInForce(v1beta1.Source{Source: "flags", Provider: tc.entry}, tc.source, tc.operator)).To(Equal(tc.want))
		})
	}
}

// TestProviderInForceInTheGraph: the graph's references and its default
// provider follow the same rule.
func TestProviderInForceInTheGraph(t *testing.T) {
	g := NewWithT(t)
	g.Expect(New().Snapshot().DefaultSyncProvider()).To(Equal(v1beta1.SyncProviderFile))
	g.Expect(New(WithDefaultSyncProvider("")).Snapshot().DefaultSyncProvider()).To(Equal(v1beta1.SyncProviderFile))

	top := New(WithDefaultSyncProvider(v1beta1.SyncProviderKubernetes))
	g.Expect(top.Snapshot().DefaultSyncProvider()).To(Equal(v1beta1.SyncProviderKubernetes))
	src := newSource("shop", "src", ref("a", ""), ref("b", v1beta1.SyncProviderFile))
	_, err := top.UpsertSource(src)
	g.Expect(err).NotTo(HaveOccurred())
	var providers []string
	for _, r := range top.Snapshot().FlagSetRefs(srcK("shop", "src")) {
		providers = append(providers, r.Provider)
	}
	g.Expect(providers).To(Equal([]string{string(v1beta1.SyncProviderKubernetes), string(v1beta1.SyncProviderFile)}))

	src = src.DeepCopy() // the topology keeps what it was given
	src.Spec.DefaultSyncProvider = v1beta1.SyncProviderFlagdProxy
	_, err = top.UpsertSource(src)
	g.Expect(err).NotTo(HaveOccurred())
	providers = nil
	for _, r := range top.Snapshot().FlagSetRefs(srcK("shop", "src")) {
		providers = append(providers, r.Provider)
	}
	g.Expect(providers).To(Equal([]string{string(v1beta1.SyncProviderFlagdProxy), string(v1beta1.SyncProviderFile)}))
}
