package api

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	flagplanev1beta1 "github.com/flagplane/flagplane/api/v1beta1"
)

var _ = Describe("Invalid manifests", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx, "invalid") })

	DescribeTable("are rejected by the API server with a message that says what is wrong, and not stored",
		func(ctx SpecContext, file, message string) {
			path := filepath.Join("testdata", "invalid", file)
			_, err := cp.Kubectl("apply", "-n", ns, "-f", path)
			Expect(err).To(MatchError(ContainSubstring(message)))

			obj := &unstructured.Unstructured{Object: readManifest(path)}
			err = k8s.Get(ctx, key(ns, obj.GetName()), obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "expected NotFound, got %v", err)
		},
		Entry("flag state not ENABLED or DISABLED", "featureflag-bad-state.yaml",
			`spec.flagSpec.flags.greeting.state: Unsupported value: "ON": supported values: "ENABLED", "DISABLED"`),
		Entry("flag without variants", "featureflag-no-variants.yaml",
			"spec.flagSpec.flags.greeting.variants: Required value"),
		Entry("flag without defaultVariant", "featureflag-no-default-variant.yaml",
			"spec.flagSpec.flags.greeting.defaultVariant: Required value"),
		Entry("unknown sync provider", "featureflagsource-bad-provider.yaml",
			`spec.sources[0].provider: Unsupported value: "git": supported values: "", "kubernetes", "file", "http", "grpc", "gcs", "azblob", "s3", "flagd-proxy"`),
		Entry("source without sources", "featureflagsource-no-sources.yaml",
			"spec.sources: Required value"),
		Entry("sources entry without source", "featureflagsource-no-source.yaml",
			"spec.sources[0].source: Required value"),
		Entry("targetRef of kind Pod", "featureflagsource-targetref-pod.yaml",
			"targetRefs kind must be Deployment, StatefulSet or DaemonSet"),
		Entry("targetRef of kind Service", "featureflagsource-targetref-service.yaml",
			"targetRefs kind must be Deployment, StatefulSet or DaemonSet"),
		Entry("targetRef of a group other than apps", "featureflagsource-targetref-group.yaml",
			"targetRefs group must be apps"),
		Entry("the same workload twice in targetRefs", "featureflagsource-targetref-duplicate.yaml",
			"targetRefs must not name a workload twice"),
		Entry("targetRefs and selector together", "featureflagsource-targetrefs-and-selector.yaml",
			"set targetRefs or selector, not both"),
		Entry("negative http poll interval", "featureflagsource-negative-interval.yaml",
			"spec.sources[0].interval: Invalid value: -5: spec.sources[0].interval in body should be greater than or equal to 0"),
		Entry("cache neither lru nor disabled", "inprocessconfiguration-bad-cache.yaml",
			`spec.cache: Invalid value: "fifo": spec.cache in body should match '^(lru|disabled)$'`),
		Entry("Flagd without a FeatureFlagSource", "flagd-no-source.yaml",
			"spec.featureFlagSource: Required value"),
		Entry("Flagd with a Service type Kubernetes does not have", "flagd-bad-service-type.yaml",
			`spec.serviceType: Unsupported value: "Headless": supported values: "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"`),
		Entry("Flagd setting a label flagplane sets", "flagd-reserved-label.yaml",
			"labels must not set app, app.kubernetes.io/name, app.kubernetes.io/managed-by or app.kubernetes.io/version"),
	)

	It("names the field of a targetRef's kind rule, so that the user finds the entry", func() {
		_, err := cp.Kubectl("apply", "-n", ns, "-f", filepath.Join("testdata", "invalid", "featureflagsource-targetref-service.yaml"))
		Expect(err).To(MatchError(MatchRegexp(`spec\.targetRefs\[0\]: Invalid value: .*targetRefs kind must be Deployment, StatefulSet or DaemonSet`)))
	})

	DescribeTable("enforce the maximum number of items, accepting exactly the maximum",
		func(ctx SpecContext, build func(n int) *flagplanev1beta1.FeatureFlagSource, limit int, message string) {
			atLimit := build(limit)
			atLimit.Namespace, atLimit.Name = ns, "at-limit"
			Expect(k8s.Create(ctx, atLimit)).To(Succeed())

			over := build(limit + 1)
			over.Namespace, over.Name = ns, "over-limit"
			err := k8s.Create(ctx, over)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("targetRefs: 64", func(n int) *flagplanev1beta1.FeatureFlagSource {
			ffs := sourceWith(1)
			for i := range n {
				ffs.Spec.TargetRefs = append(ffs.Spec.TargetRefs, flagplanev1beta1.TargetRef{Kind: "Deployment", Name: fmt.Sprintf("app-%d", i)})
			}
			return ffs
		}, 64, "spec.targetRefs: Too many: 65: must have at most 64 items"),
		Entry("sources: 256", sourceWith, 256, "spec.sources: Too many: 257: must have at most 256 items"),
	)
})

// sourceWith returns a FeatureFlagSource with n file sources.
func sourceWith(n int) *flagplanev1beta1.FeatureFlagSource {
	ffs := &flagplanev1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{}}
	for i := range n {
		ffs.Spec.Sources = append(ffs.Spec.Sources, flagplanev1beta1.Source{
			Source: fmt.Sprintf("flags-%d", i), Provider: flagplanev1beta1.SyncProviderFile,
		})
	}
	return ffs
}
