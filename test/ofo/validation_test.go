package ofo

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// notStoredAs is chainsaw's error operation: no object in ns matches the
// manifest (there is none by its name, or the one there differs).
func notStoredAs(ctx context.Context, ns string, m *unstructured.Unstructured) {
	GinkgoHelper()
	got, err := stored(ctx, ns, m)
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(got).NotTo(matchManifest(m))
}

// A flag set whose targeting refers to an evaluator it does not define
// ($ref: emailWithFaas) is admitted by the OpenFeature Operator. flagplane
// admits it too, with a warning (docs/openfeature-operator.md,
// "Differences": FeatureFlag validation); the warning is not part of the
// scenario, so it is only reported.

var _ = Describe("validate-featureflag-create", func() {
	It("admits the good flag sets and refuses the bad one", func(ctx SpecContext) {
		const scenario = "validate-featureflag-create"
		ns := newNamespace(ctx)

		By("step-00: apply good-empty and good, which are admitted, and bad, which is refused")
		apply(ns, scenario, "featureflag_good_empty.yaml")
		warnings := apply(ns, scenario, "featureflag_good.yaml")
		AddReportEntry("kubectl's warnings on featureflag_good.yaml", warnings)
		_, stderr, err := kubectl("apply", "-n", ns, "-f", testdata(scenario, "featureflag_bad.yaml"))
		Expect(err).To(HaveOccurred(), "featureflag_bad.yaml was admitted")
		Expect(stderr).To(ContainSubstring("does not match flagd's flag schema"), "refused by flagplane's validation")
		AddReportEntry("the refusal of featureflag_bad.yaml", stderr)

		By("step-01: good-empty and good are stored as written; bad is not")
		for _, file := range []string{"featureflag_good_empty.yaml", "featureflag_good.yaml"} {
			Expect(stored(ctx, ns, manifest(scenario, file))).To(matchManifest(manifest(scenario, file)), file)
		}
		notStoredAs(ctx, ns, manifest(scenario, "featureflag_bad.yaml"))
	})
})

var _ = Describe("validate-featureflag-update", func() {
	It("admits updates to good flag sets, and the bad one is never stored", func(ctx SpecContext) {
		const scenario = "validate-featureflag-update"
		ns := newNamespace(ctx)
		replace := func(file string) (string, error) {
			_, stderr, err := kubectl("replace", "-n", ns, "-f", testdata(scenario, file))
			return stderr, err
		}

		By("step-00: apply good-empty, update it to good, check it is not bad, update it back to good-empty")
		apply(ns, scenario, "featureflag_good_empty.yaml")
		Expect(replace("featureflag_good.yaml")).Error().NotTo(HaveOccurred())
		Expect(stored(ctx, ns, manifest(scenario, "featureflag_good.yaml"))).To(matchManifest(manifest(scenario, "featureflag_good.yaml")))
		notStoredAs(ctx, ns, manifest(scenario, "featureflag_bad.yaml"))
		Expect(replace("featureflag_good_empty.yaml")).Error().NotTo(HaveOccurred())
		Expect(stored(ctx, ns, manifest(scenario, "featureflag_good_empty.yaml"))).To(matchManifest(manifest(scenario, "featureflag_good_empty.yaml")))

		By("beyond the scenario, which never sends it: an update to bad is refused, and good-empty stays")
		stderr, err := replace("featureflag_bad.yaml")
		Expect(err).To(HaveOccurred(), "the update to featureflag_bad.yaml was admitted")
		Expect(stderr).To(ContainSubstring("does not match flagd's flag schema"))
		notStoredAs(ctx, ns, manifest(scenario, "featureflag_bad.yaml"))
		Expect(stored(ctx, ns, manifest(scenario, "featureflag_good_empty.yaml"))).To(matchManifest(manifest(scenario, "featureflag_good_empty.yaml")))
	})
})
