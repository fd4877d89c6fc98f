package admission

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
)

// kubectlStderr runs kubectl against the control plane, expects it to
// succeed, and returns what it printed on standard error (its warnings).
func kubectlStderr(args ...string) string {
	GinkgoHelper()
	cmd := exec.Command(cp.KubectlPath, append([]string{"--kubeconfig=" + cp.KubeconfigPath}, args...)...)
	cmd.Env = append(os.Environ(), "KUBERC=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	Expect(cmd.Run()).To(Succeed(), "kubectl %v: %s", args, stderr.String())
	return stderr.String()
}

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
		Entry("unknown operator", "featureflag-unknown-operator.yaml",
			`unknown operator "startsWith"; flagd knows`),
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

	// What flagd loads but is probably a mistake: the OpenFeature Operator
	// admits it, so flagplane does too, with warnings that kubectl prints,
	// and says so in the FeatureFlag's Consistent condition; the flag set is
	// served (Accepted).
	DescribeTable("kubectl apply is admitted with the webhook's warnings, which kubectl prints; the status says it",
		func(ctx SpecContext, file, warning string) {
			ns := newNamespace(ctx)
			path := filepath.Join("testdata", file)
			stderr := kubectlStderr("apply", "-n", ns, "-f", path)
			Expect(stderr).To(ContainSubstring("Warning: " + warning))

			raw, err := os.ReadFile(path)
			Expect(err).NotTo(HaveOccurred())
			ff := &v1beta1.FeatureFlag{}
			Expect(yaml.Unmarshal(raw, ff)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: ff.Name}, ff)).To(Succeed())
				g.Expect(meta.FindStatusCondition(ff.Status.Conditions, v1beta1.ConditionAccepted)).To(HaveField("Status", metav1.ConditionTrue))
				g.Expect(meta.FindStatusCondition(ff.Status.Conditions, v1beta1.ConditionConsistent)).To(And(
					HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonProbableMistakes),
					HaveField("Message", ContainSubstring(warning))))
			}).Should(Succeed())
		},
		Entry("$ref to a missing evaluator", "featureflag-unknown-ref.yaml",
			`spec.flagSpec.flags[new-checkout].targeting: Invalid value: "beta-users": $ref "beta-users" does not name an entry of $evaluators: flagd evaluates the flag to an error`),
		Entry("targeting returns a variant the flag does not have", "featureflag-unknown-variant.yaml",
			`spec.flagSpec.flags[new-checkout].targeting: Invalid value: "of": targeting can return variant "of", which the flag does not have (variants: off, on)`),
		Entry("a variant nothing can return", "featureflag-unreachable-variant.yaml",
			`spec.flagSpec.flags[color].variants: Invalid value: "green": can never be served: the targeting returns only "red" and the defaultVariant is "blue"`),
	)

	It("answers kubectl apply --dry-run=server with what the change reaches, from the graph, and stores nothing", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout")
		create(ctx, ff,
			fixtures.Source(ns, "web", []v1beta1.Source{fixtures.FileRef("checkout")}, fixtures.Targeting("Deployment", "web")),
			fixtures.Deployment(ns, "web", nil, nil))
		edited := fixtures.FlagSet(ns, "checkout", "on")
		edited.TypeMeta = metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: v1beta1.FeatureFlagKind}
		raw, err := yaml.Marshal(edited)
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(GinkgoT().TempDir(), "checkout.yaml")
		Expect(os.WriteFile(path, raw, 0o600)).To(Succeed())
		Eventually(func() string { return kubectlStderr("apply", "--dry-run=server", "-n", ns, "-f", path) }).Should(ContainSubstring(
			"Warning: flagplane: this flag set reaches 1 namespace, 1 workload and 0 Flagds through 1 FeatureFlagSource (" + ns + ")"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
		Expect(ff.Spec.FlagSpec.Flags["new-checkout"].DefaultVariant).To(Equal("off"), "a dry run stores nothing")
	})

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

	It("refuses a namespace whose FeatureFlags hold its share of the budget with 429, and admits another namespace's meanwhile", func(ctx SpecContext) {
		busy, other := newNamespace(ctx), newNamespace(ctx)
		budget := operator.admission.Budget
		release, err := budget.Take(ctx, busy, budget.Share())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(release)

		err = k8s.Create(ctx, flagSet(busy, "checkout"))
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the API server's answer: %v", err)
		Expect(err).To(MatchError(ContainSubstring("the webhook is judging other FeatureFlags of namespace " + busy)))
		Expect(k8s.Create(ctx, flagSet(other, "checkout"))).To(Succeed())

		By("the share given back, the namespace's FeatureFlag is admitted")
		release()
		Expect(k8s.Create(ctx, flagSet(busy, "checkout"))).To(Succeed())
	})
})
