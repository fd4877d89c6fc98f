package api

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	flagplanev1beta1 "github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/gitopshealth"
)

// No controller runs in this suite: what the API server stores is what a
// GitOps tool sees of an object flagplane has not reconciled yet.
var _ = Describe("A new object, before flagplane reconciles it", func() {
	DescribeTable("has status.observedGeneration 0 from the CRD's default, so kstatus, Argo CD and Flux wait for it",
		func(ctx SpecContext, obj client.Object) {
			ns := newNamespace(ctx, "kstatus")
			obj.SetNamespace(ns)
			obj.SetName("fresh")
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			u := get(ctx, obj)
			Expect(u.GetGeneration()).To(BeEquivalentTo(1))
			observed, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			Expect(err).NotTo(HaveOccurred())
			Expect(found).To(BeTrue(), "the CRD defaults status: %v", u.Object["status"])
			Expect(observed).To(BeZero())

			res, err := status.Compute(u)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(status.InProgressStatus), "kstatus: %s", res.Message)
			argo, err := gitopshealth.Argo(u)
			Expect(err).NotTo(HaveOccurred())
			Expect(argo.Status).To(Equal("Progressing"), argo.Message)
			flux, err := gitopshealth.Flux(u)
			Expect(err).NotTo(HaveOccurred())
			Expect(flux).To(Equal("InProgress"))

			By("control: without the default, kstatus would call it Current")
			unstructured.RemoveNestedField(u.Object, "status")
			res, err = status.Compute(u)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(status.CurrentStatus))
		},
		Entry("FeatureFlag", &flagplanev1beta1.FeatureFlag{Spec: flagplanev1beta1.FeatureFlagSpec{FlagSpec: flagplanev1beta1.FlagSpec{
			Flags: map[string]flagplanev1beta1.Flag{"new-checkout": boolFlag()}}}}),
		Entry("FeatureFlagSource", &flagplanev1beta1.FeatureFlagSource{Spec: flagplanev1beta1.FeatureFlagSourceSpec{
			Sources: []flagplanev1beta1.Source{{Source: "flags", Provider: flagplanev1beta1.SyncProviderFile}}}}),
		Entry("Flagd", &flagplanev1beta1.Flagd{Spec: flagplanev1beta1.FlagdSpec{FeatureFlagSource: "src"}}),
		Entry("InProcessConfiguration", &flagplanev1beta1.InProcessConfiguration{}),
		Entry("FeatureFlagSourcePolicy", &policyv1alpha1.FeatureFlagSourcePolicy{Spec: policyv1alpha1.FeatureFlagSourcePolicySpec{
			TargetRef: policyv1alpha1.PolicyTargetReference{Kind: "Namespace", Name: "anywhere"},
			Defaults:  &policyv1alpha1.SourceSettingsBlock{SourceSettings: policyv1alpha1.SourceSettings{LogFormat: "json"}}}}),
	)
})
