package workflows_test

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/status"
)

// TestReferencesAreReadAlike: every reference to an object by `name` or
// `namespace/name` (a source's spec.sources[].source, a Flagd's
// spec.featureFlagSource, a pod's openfeature.dev/featureflagsource) is read
// by one parser, topology.ParseRef: what validation refuses the graph never
// resolves, and what it accepts resolves when the object exists. `a/b/c`
// is refused and unresolved everywhere.
func TestReferencesAreReadAlike(t *testing.T) {
	for _, tc := range []struct {
		ref   string // NAME stands for the name of the object that exists
		valid bool
	}{
		{"NAME", true},
		{"shop/NAME", true},
		{"a/b/c", false},
		{"shop/NAME/x", false},
		{"/NAME", false},
		{"shop/", false},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			g := NewWithT(t)
			topo := topology.New()
			ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}}
			g.Expect(topo.UpsertFlagSet(ff)).Error().NotTo(HaveOccurred())

			// A source naming a FeatureFlag.
			flagSetRef := strings.ReplaceAll(tc.ref, "NAME", "flags")
			src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "src"}}
			src.Spec.Sources = []v1beta1.Source{{Source: flagSetRef, Provider: v1beta1.SyncProviderFile}}
			g.Expect(topo.UpsertSource(src)).Error().NotTo(HaveOccurred())

			// A Flagd and a workload naming the source.
			sourceRef := strings.ReplaceAll(tc.ref, "NAME", "src")
			fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fd"}}
			fd.Spec.FeatureFlagSource = sourceRef
			g.Expect(topo.UpsertFlagd(fd)).Error().NotTo(HaveOccurred())
			web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
			g.Expect(topo.UpsertWorkload(topology.Workload{Kind: topology.KindDeployment, Namespace: "shop", Name: "web",
				PodAnnotations: map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: sourceRef}})).
				Error().NotTo(HaveOccurred())
			v := topo.Snapshot()
			srcKey := topology.SourceKey("shop", "src")

			g.Expect(status.ValidateSource(src, "")).To(haveLenIf(tc.valid), "validation of %q", flagSetRef)
			g.Expect(v.UnresolvedRefs(srcKey)).To(haveLenIf(tc.valid), "the graph's reading of %q", flagSetRef)

			var flagdRefErrs []string
			for _, e := range flagds.Validate(fd) {
				if e.Field == "spec.featureFlagSource" {
					flagdRefErrs = append(flagdRefErrs, e.Error())
				}
			}
			g.Expect(flagdRefErrs).To(haveLenIf(tc.valid), "validation of %q", sourceRef)
			_, state, _ := v.FlagdSource(topology.FlagdKey("shop", "fd"))
			g.Expect(state == topology.RefResolved).To(Equal(tc.valid), "the graph's reading of %q", sourceRef)

			g.Expect(slices.Contains(v.SourcesOfWorkload(web), srcKey)).To(Equal(tc.valid), "the annotation %q", sourceRef)
		})
	}
}

// haveLenIf matches an empty list when valid, else a list of one.
func haveLenIf(valid bool) OmegaMatcher {
	if valid {
		return BeEmpty()
	}
	return HaveLen(1)
}
