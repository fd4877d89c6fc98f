package api

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
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
		Entry("FeatureFlagRolloutPolicy", &deliveryv1alpha1.FeatureFlagRolloutPolicy{Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: flagplanev1beta1.GroupVersion.Group, Kind: flagplanev1beta1.FeatureFlagKind, Name: "flags"},
			Steps:     []deliveryv1alpha1.RolloutStep{{Percentage: ptr.To[int32](100)}}}}),
	)
})

var _ = Describe("A FeatureFlagRevision", func() {
	It("has no status, so kstatus calls it Current, and no Argo CD check or Flux expression reads it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "kstatus")
		rev := &deliveryv1alpha1.FeatureFlagRevision{}
		rev.Namespace, rev.Name = ns, "flags-1"
		rev.Spec = deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: "flags", Number: 1, Revision: "46aaf88324ce",
			FlagSpec: flagplanev1beta1.FlagSpec{Flags: map[string]flagplanev1beta1.Flag{"new-checkout": boolFlag()}}}
		Expect(k8s.Create(ctx, rev)).To(Succeed())
		u := get(ctx, rev)
		Expect(u.Object).NotTo(HaveKey("status"))

		res, err := status.Compute(u)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Status).To(Equal(status.CurrentStatus), "kstatus: %s", res.Message)
		_, err = gitopshealth.Argo(u)
		Expect(err).To(MatchError(ContainSubstring("no Argo CD health check for FeatureFlagRevision.delivery.flagplane.dev")))
		_, err = gitopshealth.Flux(u)
		Expect(err).To(MatchError(ContainSubstring("has no Flux health check expressions")))
	})
})
