package status

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestValidateSource: the syntax of a flag-set reference is topology.ParseRef's
// (`name` or `namespace/name`, nothing else), checked only for the entries
// whose provider in force (topology.ProviderInForce) names a FeatureFlag.
func TestValidateSource(t *testing.T) {
	const (
		file       = v1beta1.SyncProviderFile
		kubernetes = v1beta1.SyncProviderKubernetes
		http       = v1beta1.SyncProviderHTTP
	)
	for _, tc := range []struct {
		name          string
		entry         v1beta1.Source
		sourceDefault v1beta1.SyncProviderType
		operator      v1beta1.SyncProviderType
		selector      *metav1.LabelSelector
		want          []string // "field: detail"
	}{
		{name: "a name", entry: v1beta1.Source{Source: "flags", Provider: file}},
		{name: "namespace/name", entry: v1beta1.Source{Source: "team/flags", Provider: kubernetes}},
		{name: "three parts", entry: v1beta1.Source{Source: "a/b/c", Provider: file},
			want: []string{"spec.sources[0].source: provider file takes a FeatureFlag as name or namespace/name"}},
		{name: "no namespace before the slash", entry: v1beta1.Source{Source: "/flags", Provider: file},
			want: []string{"spec.sources[0].source: provider file takes a FeatureFlag as name or namespace/name"}},
		{name: "no name after the slash", entry: v1beta1.Source{Source: "team/", Provider: file},
			want: []string{"spec.sources[0].source: provider file takes a FeatureFlag as name or namespace/name"}},
		{name: "empty", entry: v1beta1.Source{Source: "", Provider: file},
			want: []string{"spec.sources[0].source: provider file takes a FeatureFlag as name or namespace/name"}},
		{name: "a URI provider names no FeatureFlag", entry: v1beta1.Source{Source: "a/b/c", Provider: http}},
		{name: "the source's default provider decides", entry: v1beta1.Source{Source: "a/b/c"}, sourceDefault: http, operator: kubernetes},
		{name: "else the operator's", entry: v1beta1.Source{Source: "a/b/c"}, operator: kubernetes,
			want: []string{"spec.sources[0].source: provider kubernetes takes a FeatureFlag as name or namespace/name"}},
		{name: "a selector that does not parse", entry: v1beta1.Source{Source: "flags"},
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}},
			want:     []string{"spec.selector: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "src"}}
			src.Spec.Sources = []v1beta1.Source{tc.entry}
			src.Spec.DefaultSyncProvider = tc.sourceDefault
			src.Spec.Selector = tc.selector
			errs := ValidateSource(src, tc.operator)
			g.Expect(errs).To(HaveLen(len(tc.want)), "%v", errs)
			for i, want := range tc.want {
				g.Expect(errs[i].Field + ": " + errs[i].Detail).To(HavePrefix(want))
			}
		})
	}
}
