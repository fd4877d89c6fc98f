package topology

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestParseAnnotations is the one reading of the openfeature.dev pod
// annotations (the graph, WorkloadChanged, SameAnnotationRefs and the Pod
// webhook's opt-in use it).
func TestParseAnnotations(t *testing.T) {
	const (
		enabled = v1beta1.AnnotationEnabled
		sources = v1beta1.AnnotationFeatureFlagSource
		ipcs    = v1beta1.AnnotationInProcessConfiguration
	)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		optedIn     bool
		sources     []Key
		ipcs        []Key
	}{
		{name: "no annotations"},
		{name: "names sources without opting in", annotations: map[string]string{sources: "a"}},
		{name: "enabled false", annotations: map[string]string{enabled: "false", sources: "a"}},
		{name: "enabled is exactly true, not True", annotations: map[string]string{enabled: "True", sources: "a"}},
		{name: "opted in, naming nothing", annotations: map[string]string{enabled: "true"}, optedIn: true},
		{name: "a name is in the pod's namespace", annotations: map[string]string{enabled: "true", sources: "a"},
			optedIn: true, sources: []Key{srcK("shop", "a")}},
		{name: "annotation order, spaces, empty items and repeats",
			annotations: map[string]string{enabled: "true", sources: " b ,, a , b,team/a ,"},
			optedIn:     true, sources: []Key{srcK("shop", "b"), srcK("shop", "a"), srcK("team", "a")}},
		{name: "in-process configurations, the same way",
			annotations: map[string]string{enabled: "true", sources: "a", ipcs: "team/c, d"},
			optedIn:     true, sources: []Key{srcK("shop", "a")}, ipcs: []Key{ipcK("team", "c"), ipcK("shop", "d")}},
		{name: "a malformed reference keeps its parts and names nothing that can exist",
			annotations: map[string]string{enabled: "true", sources: "a/b/c, /d, e/"},
			optedIn:     true, sources: []Key{srcK("a", "b/c"), srcK("", "d"), srcK("e", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(OptedIn(tc.annotations)).To(Equal(tc.optedIn))
			gotSources, gotIPCs := ParseAnnotations("shop", tc.annotations)
			g.Expect(gotSources).To(Equal(tc.sources))
			g.Expect(gotIPCs).To(Equal(tc.ipcs))
			w := newWorkloadRec(Workload{Kind: KindDeployment, Namespace: "shop", Name: "web", PodAnnotations: tc.annotations})
			g.Expect(w.annotSources).To(Equal(tc.sources), "the graph reads them the same way")
			g.Expect(w.annotIPCs).To(Equal(tc.ipcs), "the graph reads them the same way")
		})
	}
}

func TestSameAnnotationRefs(t *testing.T) {
	g := NewWithT(t)
	on := func(value string) map[string]string {
		return map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: value}
	}
	g.Expect(SameAnnotationRefs("shop", on("a, b"), on("a,b,a"))).To(BeTrue(), "spelt another way")
	g.Expect(SameAnnotationRefs("shop", on("a"), on("shop/a"))).To(BeTrue(), "a name is in the namespace")
	g.Expect(SameAnnotationRefs("shop", on("a,b"), on("b,a"))).To(BeFalse(), "the order is the order of the settings")
	g.Expect(SameAnnotationRefs("shop", on("a"), map[string]string{v1beta1.AnnotationFeatureFlagSource: "a"})).To(BeFalse(), "opted out")
	g.Expect(SameAnnotationRefs("shop", nil, map[string]string{v1beta1.AnnotationFeatureFlagSource: "a"})).To(BeTrue(), "neither opted in")
}
