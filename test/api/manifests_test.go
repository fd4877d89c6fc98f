package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	flagplanev1beta1 "github.com/flagplane/flagplane/api/v1beta1"
)

// sidecarDefaults are the FeatureFlagSource defaults of the OpenFeature
// Operator, which the API server must fill in.
var sidecarDefaults = map[string]any{
	"managementPort": 8014, "port": 8013, "ofrepPort": 8016,
	"evaluator": "json", "logFormat": "json", "envVarPrefix": "FLAGD",
}

var _ = Describe("OpenFeature Operator manifests", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx, "manifests") })

	DescribeTable("apply unchanged with kubectl and read back equal, defaults filled in",
		func(file string, defaults map[string]any) {
			path := filepath.Join("testdata", "valid", file)
			// kubectl's default field validation is strict: a field the
			// CRD does not know fails the apply instead of being dropped.
			kubectl("apply", "-n", ns, "-f", path)

			want := spec(readManifest(path))
			for field, value := range defaults {
				Expect(want).NotTo(HaveKey(field), "the manifest sets %s, so it cannot show its default", field)
				want[field] = value
			}
			stored := readJSON(kubectl("get", "-n", ns, "-f", path, "-o", "json"))
			Expect(normalize(spec(stored))).To(Equal(normalize(want)))

			By("decoding into the Go API types without unknown fields")
			expectDecodesStrictly(stored)
		},
		Entry("FeatureFlag, documented form", "featureflag-minimal.yaml", nil),
		Entry("FeatureFlag with targeting, $evaluators and metadata", "featureflag-full.yaml", nil),
		Entry("FeatureFlagSource, minimal: the sidecar settings are defaulted", "featureflagsource-minimal.yaml", sidecarDefaults),
		Entry("FeatureFlagSource with every OpenFeature Operator field", "featureflagsource-full.yaml", nil),
		Entry("FeatureFlagSource with a workload selector", "featureflagsource-selector.yaml", sidecarDefaults),
		Entry("FeatureFlagSource with the OpenFeature Operator v0.9.3's keepalive fields", "featureflagsource-keepalive.yaml", sidecarDefaults),
		Entry("InProcessConfiguration, documented form", "inprocessconfiguration-minimal.yaml",
			map[string]any{"host": "localhost", "cache": "lru"}),
		Entry("InProcessConfiguration with every field", "inprocessconfiguration-full.yaml", nil),
		Entry("InProcessConfiguration, all defaults", "inprocessconfiguration-empty.yaml", map[string]any{
			"port": 8015, "host": "localhost", "tls": false, "cache": "lru", "cacheMaxSize": 1000, "envVarPrefix": "FLAGD",
		}),
		Entry("Flagd, documented form", "flagd-documented.yaml", nil),
		Entry("Flagd, minimal: replicas and Service type defaulted", "flagd-minimal.yaml",
			map[string]any{"replicas": 1, "serviceType": "ClusterIP"}),
		Entry("Flagd with every field", "flagd-full.yaml", nil),
	)

	It("accepts targetRefs and defaults their group to apps", func(ctx SpecContext) {
		path := filepath.Join("testdata", "valid", "featureflagsource-targetrefs.yaml")
		kubectl("apply", "-n", ns, "-f", path)

		var ffs flagplanev1beta1.FeatureFlagSource
		Expect(k8s.Get(ctx, key(ns, "checkout-sidecars"), &ffs)).To(Succeed())
		Expect(ffs.Spec.TargetRefs).To(Equal([]flagplanev1beta1.TargetRef{
			{Group: "apps", Kind: "Deployment", Name: "checkout"},
			{Group: "apps", Kind: "StatefulSet", Name: "ledger"},
			{Group: "apps", Kind: "DaemonSet", Name: "node-agent"},
		}))
		Expect(ffs.Spec.Selector).To(BeNil())
		Expect(ffs.Spec.ManagementPort).To(BeEquivalentTo(8014))
	})
})

// readManifest reads one YAML object from a file, as JSON-compatible values.
func readManifest(path string) map[string]any {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var obj map[string]any
	Expect(yaml.Unmarshal(data, &obj)).To(Succeed(), "parsing %s", path)
	return obj
}

func readJSON(s string) map[string]any {
	GinkgoHelper()
	var obj map[string]any
	Expect(json.Unmarshal([]byte(s), &obj)).To(Succeed())
	return obj
}

func spec(obj map[string]any) map[string]any {
	GinkgoHelper()
	s, found, err := unstructured.NestedMap(obj, "spec")
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue(), "object has no spec")
	return s
}

// normalize round-trips v through JSON, so that numbers compare equal
// whatever Go type they were read or written as.
func normalize(v any) any {
	GinkgoHelper()
	data, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	var out any
	Expect(json.Unmarshal(data, &out)).To(Succeed())
	return out
}

// expectDecodesStrictly checks that the Go types of api/v1beta1 know every
// field the API server returned, so that controllers lose nothing of it.
func expectDecodesStrictly(obj map[string]any) {
	GinkgoHelper()
	u := unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	Expect(gvk.GroupVersion()).To(Equal(flagplanev1beta1.GroupVersion))
	typed, err := cp.Scheme.New(gvk)
	Expect(err).NotTo(HaveOccurred())
	data, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	Expect(dec.Decode(typed)).To(Succeed())
}
