package admission

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// This suite's manager runs with its defaults, so without
// --prometheus-gates; test/e2e runs with them on.
var _ = Describe("a FeatureFlagRolloutPolicy with a Prometheus gate", func() {
	prometheusPolicy := func(ns, address string) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
		return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps:     []deliveryv1alpha1.RolloutStep{{Percentage: ptr.To[int32](100)}},
				Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePrometheus,
					Prometheus: &deliveryv1alpha1.PrometheusGate{Address: address, Query: "up"}}},
			},
		}
	}
	refusedWith := func(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy) func() string {
		return func() string {
			err := k8s.Create(ctx, p.DeepCopy(), client.DryRunAll)
			if err == nil {
				return ""
			}
			return err.Error()
		}
	}

	It("is refused while the manager runs without --prometheus-gates, saying how to turn them on; without it the policy is admitted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"))
		p := prometheusPolicy(ns, "http://prometheus.monitoring.svc:9090")
		Expect(refusedWith(ctx, p)()).To(ContainSubstring("gate Prometheus is off in this manager (its --prometheus-gates)"))
		p.Spec.Gates = []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateRestarts}}
		Expect(k8s.Create(ctx, p)).To(Succeed())
	})

	It("is confined to one Prometheus by a ValidatingAdmissionPolicy as docs/delivery.md shows it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"))
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "flagplane-prometheus-gates-" + ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{deliveryv1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
							Resources: []string{"featureflagrolloutpolicies"}},
					}}},
				},
				// The expression and message of docs/delivery.md.
				Validations: []admissionregistrationv1.Validation{{
					Expression: `!has(object.spec.gates) || object.spec.gates.all(g, g.type != 'Prometheus' || g.prometheus.address == 'http://prometheus.monitoring.svc:9090')`,
					Message:    "a Prometheus gate may query http://prometheus.monitoring.svc:9090 only",
				}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}
		create(ctx, vap, binding)
		DeferCleanup(func(ctx SpecContext) {
			Expect(k8s.Delete(ctx, binding)).To(Succeed())
			Expect(k8s.Delete(ctx, vap)).To(Succeed())
		})

		By("any other address is refused by the policy, before the webhook; user info or a longer host do not pass")
		for _, address := range []string{"http://metadata.internal", "http://prometheus.monitoring.svc:9090@evil.example",
			"http://prometheus.monitoring.svc:9090.evil.example"} {
			Eventually(refusedWith(ctx, prometheusPolicy(ns, address))).Should(
				ContainSubstring("a Prometheus gate may query http://prometheus.monitoring.svc:9090 only"), address)
		}
		By("the allowed address passes the policy, and reaches the webhook (which refuses it here: the gates are off)")
		Expect(refusedWith(ctx, prometheusPolicy(ns, "http://prometheus.monitoring.svc:9090"))()).To(And(
			ContainSubstring("gate Prometheus is off in this manager"), Not(ContainSubstring("may query"))))
	})
})
