package admission

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"os"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

var _ = Describe("Validation", func() {
	DescribeTable("kubectl apply is refused with the webhook's message, and nothing is stored",
		func(ctx SpecContext, file, message string) {
			ns := newNamespace(ctx)
			path := filepath.Join("testdata", file)
			_, err := cp.Kubectl("apply", "-n", ns, "-f", path)
			Expect(err).To(MatchError(ContainSubstring(message)))

			raw, rerr := os.ReadFile(path)
			Expect(rerr).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(raw, &obj.Object)).To(Succeed())
			err = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "expected NotFound, got %v", err)
		},
		Entry("defaultVariant not a variant", "featureflag-default-variant.yaml",
			`The FeatureFlag "checkout" is invalid: spec.flagSpec.flags[new-checkout].defaultVariant: Invalid value: "of": must be one of the variants: off, on`),
		Entry("variants of two types", "featureflag-mixed-types.yaml",
			`spec.flagSpec.flags[new-checkout].variants[on]: Invalid value: "true": all variants of a flag must have one type: "on" is boolean but "off" is string`),
		Entry("$ref to a missing evaluator", "featureflag-unknown-ref.yaml",
			`spec.flagSpec.flags[new-checkout].targeting: Invalid value: "beta-users": $ref "beta-users" does not name an entry of $evaluators`),
		Entry("unknown operator", "featureflag-unknown-operator.yaml",
			`unknown operator "startsWith"; flagd knows`),
		Entry("targeting returns a variant the flag does not have", "featureflag-unknown-variant.yaml",
			`spec.flagSpec.flags[new-checkout].targeting: Invalid value: "of": targeting can return variant "of", which the flag does not have (variants: off, on)`),
		Entry("flagd's schema: a version that is not semantic", "featureflag-schema-semver.yaml",
			`spec.flagSpec.flags[new-checkout].targeting.if[0].sem_ver[2]: Invalid value: "\"1.0\"": does not match flagd's flag schema (flagd-schemas v0.2.13) at /flags/new-checkout/targeting/if/0/sem_ver/2`),
		Entry("an http source that is not a URL", "featureflagsource-http-uri.yaml",
			`The FeatureFlagSource "remote" is invalid: spec.sources[0].source: Invalid value: "flags.example/shop.json": provider http takes an http:// or https:// URL`),
		Entry("two ports the same", "featureflagsource-ports.yaml",
			`spec.managementPort: Invalid value: 9000: the same port as spec.port`),
		Entry("a reference with three parts", "featureflagsource-reference.yaml",
			`spec.sources[0].source: Invalid value: "shop/flags/checkout": provider kubernetes takes a FeatureFlag as name or namespace/name`),
		Entry("a target in another namespace", "featureflagsource-targetref-namespace.yaml",
			`spec.targetRefs[0].name: Invalid value: "other/web": a source targets workloads of its own namespace: a name, without a namespace`),
		Entry("a securityContext annotation that is not one", "featureflagsource-security-context.yaml",
			`annotation flagplane.core.openfeature.dev/sidecar-security-context must be a JSON securityContext: json: unknown field "runAsRoot"`),
	)

	It("lets a FeatureFlag through that the CRD's schema and the webhook accept, and checks its updates", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout")
		create(ctx, ff)
		var err error
		Eventually(func() bool { // the operator writes the status meanwhile: retry on conflicts
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
			flag := ff.Spec.FlagSpec.Flags["new-checkout"]
			flag.DefaultVariant = "maybe"
			ff.Spec.FlagSpec.Flags["new-checkout"] = flag
			err = k8s.Update(ctx, ff)
			return apierrors.IsConflict(err)
		}).Should(BeFalse())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring(`spec.flagSpec.flags[new-checkout].defaultVariant: Invalid value: "maybe"`)))

		By("a label on it is no spec change: allowed")
		Eventually(func() error {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
			ff.Labels = map[string]string{"team": "shop"}
			return k8s.Update(ctx, ff)
		}).Should(Succeed())
	})
})
