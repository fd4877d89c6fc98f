package e2e

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
)

// regionTargeted is a flag set whose flag is "on" only where flagd's
// evaluation context has region eu-west-1: what a policy's contextValues
// override makes flagd serve.
func regionTargeted(ns, name string) *v1beta1.FeatureFlag {
	ff := fixtures.FlagSet(ns, name, "off")
	f := ff.Spec.FlagSpec.Flags[flagKey]
	f.Targeting = json.RawMessage(`{"if":[{"==":[{"var":"region"},"eu-west-1"]},"on","off"]}`)
	ff.Spec.FlagSpec.Flags[flagKey] = f
	return ff
}

func sourcePolicy(ns, name string, mutate func(*policyv1alpha1.FeatureFlagSourcePolicySpec)) *policyv1alpha1.FeatureFlagSourcePolicy {
	p := &policyv1alpha1.FeatureFlagSourcePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.TargetRef = policyv1alpha1.PolicyTargetReference{Kind: "Namespace", Name: ns}
	mutate(&p.Spec)
	return p
}

func policyCondition(ctx SpecContext, p *policyv1alpha1.FeatureFlagSourcePolicy, t string) func() (*metav1.Condition, error) {
	return func() (*metav1.Condition, error) {
		var got policyv1alpha1.FeatureFlagSourcePolicy
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return nil, err
		}
		return meta.FindStatusCondition(got.Status.Conditions, t), nil
	}
}

var _ = Describe("a FeatureFlagSourcePolicy", func() {
	It("gives every sidecar of its namespace the platform's defaults and overrides, which the real flagd runs with; editing or deleting it rolls the workload; a policy aimed at another namespace is refused in status", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		By("the platform team's policy: a default env var and log format; overrides of the port and a region context value")
		platform := sourcePolicy(ns, "platform", func(s *policyv1alpha1.FeatureFlagSourcePolicySpec) {
			s.Defaults = &policyv1alpha1.SourceSettingsBlock{SourceSettings: policyv1alpha1.SourceSettings{
				LogFormat: "console",
				EnvVars:   []corev1.EnvVar{{Name: "PLATFORM_TIER", Value: "gold"}},
			}}
			s.Overrides = &policyv1alpha1.SourceSettingsBlock{SourceSettings: policyv1alpha1.SourceSettings{
				Port:          8095,
				ContextValues: map[string]string{"region": "eu-west-1"},
			}}
		})
		create(ctx, platform)
		By("the app team's source, which asks for port 8090 and another region")
		src := source(ns, "flags", "web", fixtures.FileRef("checkout"), func(s *v1beta1.FeatureFlagSource) {
			s.Spec.RolloutOnChange = ptr.To(true)
			s.Spec.Port = 8090
			s.Spec.ContextValues = map[string]string{"region": "us-east-1"}
		})
		create(ctx, regionTargeted(ns, "checkout"), src, deployment(ns, "web", appImage, nil))

		pod := readyPod(ctx, ns, "web")
		sidecar := sidecarOf(pod)
		Expect(sidecar.Args).To(ContainElements("--port", "8095", "--log-format", "console", "--context-value", "region=eu-west-1"))
		Expect(sidecar.Args).NotTo(ContainElement("region=us-east-1"))
		Expect(sidecar.Env).To(ContainElement(corev1.EnvVar{Name: "FLAGD_PLATFORM_TIER", Value: "gold"}))
		addr, ok := n.Addr(key(pod), injection.SidecarName, 8095)
		Expect(ok).To(BeTrue(), "the sidecar declares the overridden port")
		Eventually(resolve(addr)).Should(Equal(evaluation{Value: true, Variant: "on", Reason: "TARGETING_MATCH"}),
			"flagd evaluates with the policy's region")
		Eventually(policyCondition(ctx, platform, policyv1alpha1.ConditionEnforced)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("in force on 1 of the 1 sidecars"))))
		Eventually(policyCondition(ctx, platform, policyv1alpha1.ConditionAccepted)).Should(HaveField("Status", metav1.ConditionTrue))

		By("moving the overridden port: the workload rolls and the new flagd serves there")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(platform), platform); err != nil {
				return err
			}
			platform.Spec.Overrides.Port = 8096
			return k8s.Update(ctx, platform)
		}).Should(Succeed())
		next := successor(ctx, pod)
		Expect(sidecarOf(next).Args).To(ContainElements("--port", "8096"))
		addr, ok = n.Addr(key(next), injection.SidecarName, 8096)
		Expect(ok).To(BeTrue())
		Eventually(resolve(addr)).Should(Equal(evaluation{Value: true, Variant: "on", Reason: "TARGETING_MATCH"}))
		Eventually(eventsAbout(ctx, ns, "Deployment", "web")).Should(ContainElement(HaveField("Reason", workflows.EventRestarted)))

		By("deleting the policy: the source's own settings come back")
		Expect(k8s.Delete(ctx, platform)).To(Succeed())
		last := successor(ctx, next)
		Expect(sidecarOf(last).Args).To(ContainElements("--port", "8090", "--context-value", "region=us-east-1"))
		addr, ok = n.Addr(key(last), injection.SidecarName, 8090)
		Expect(ok).To(BeTrue())
		Eventually(resolve(addr)).Should(Equal(evaluation{Value: false, Variant: "off", Reason: "TARGETING_MATCH"}), "flagd evaluates with the source's region")

		By("a policy that targets another namespace: not accepted, applies to nothing, an Event says why")
		stray := sourcePolicy(ns, "stray", func(s *policyv1alpha1.FeatureFlagSourcePolicySpec) {
			s.Overrides = &policyv1alpha1.SourceSettingsBlock{SourceSettings: policyv1alpha1.SourceSettings{Port: 8097}}
		})
		stray.Spec.TargetRef.Name = "kube-system"
		create(ctx, stray)
		Eventually(policyCondition(ctx, stray, policyv1alpha1.ConditionAccepted)).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring("governs only the Namespace it lives in"))))
		Eventually(eventsAbout(ctx, ns, policyv1alpha1.FeatureFlagSourcePolicyKind, "stray")).Should(
			ContainElement(HaveField("Reason", workflows.EventInvalidPolicy)))
		Consistently(podsOf(ctx, ns, "web"), 2*time.Second).Should(ConsistOf(HaveField("Name", last.Name)), "no rollout for a policy that applies to nothing")
	})
})
