package webhooks

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/test/admissionfuzz"
)

// rolloutManifests is fuzzManifests with namespace shop labelled, so that
// namespaceSelector steps select its consumers or none.
var rolloutManifests = fuzzManifests + `
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {stage: canary, team: shop}}
`

// rolloutPolicyValidators are the FeatureFlagRolloutPolicy webhook as the
// manager runs it by default and with --prometheus-gates.
func rolloutPolicyValidators(tb testing.TB) []*RolloutPolicyValidator {
	graph := newGraph(tb, rolloutManifests)
	return []*RolloutPolicyValidator{{Graph: graph}, {Graph: graph, PrometheusGates: true}}
}

// rolloutPolicyRequest is the AdmissionRequest of a FeatureFlagRolloutPolicy
// in namespace shop: a create of object, or an update from old to object.
func rolloutPolicyRequest(object, old string, update bool) admission.Request {
	req := fuzzRequest(deliveryv1alpha1.FeatureFlagRolloutPolicyKind, object, old, update)
	req.Kind.Group, req.Kind.Version = deliveryv1alpha1.GroupVersion.Group, deliveryv1alpha1.GroupVersion.Version
	return req
}

// rolloutPolicyJSON is FeatureFlagRolloutPolicy shop/canary with spec
// (JSON) as its spec.
func rolloutPolicyJSON(spec string) string {
	return `{"apiVersion":"delivery.flagplane.dev/v1alpha1","kind":"FeatureFlagRolloutPolicy","metadata":{"namespace":"shop","name":"canary"},"spec":` + spec + `}`
}

// TestRolloutPolicySelectorRefusals: a step's selector that does not parse
// is refused field by field, with the reason, in a readable answer,
// whatever its size and characters. Before, the whole selector was the
// value of the error: a refusal of 616 KB for two label values of 300 KiB,
// and users' right-to-left marks printed raw (found by
// FuzzRolloutPolicyValidator).
func TestRolloutPolicySelectorRefusals(t *testing.T) {
	v := rolloutPolicyValidators(t)[0]
	for _, tc := range []struct {
		name, selector string
		says           []string
	}{
		{"an unknown operator", `{"matchExpressions":[{"key":"stage","operator":"Bogus"}]}`,
			[]string{`spec.steps[0].namespaceSelector.matchExpressions[0].operator: Invalid value: "Bogus": not a valid selector operator`}},
		{"In without values", `{"matchExpressions":[{"key":"stage","operator":"In"}]}`,
			[]string{"spec.steps[0].namespaceSelector.matchExpressions[0].values: Required value"}},
		{"Exists with values", `{"matchExpressions":[{"key":"stage","operator":"Exists","values":["x"]}]}`,
			[]string{"spec.steps[0].namespaceSelector.matchExpressions[0].values: Forbidden"}},
		{"a label value of 1 MiB", `{"matchLabels":{"stage":"` + strings.Repeat("x", 1<<20) + `"}}`,
			[]string{"spec.steps[0].namespaceSelector.matchLabels: Invalid value:", "must be no more than 63 bytes"}},
		{"an operator of 1 MiB", `{"matchExpressions":[{"key":"stage","operator":"` + strings.Repeat("x", 1<<20) + `"}]}`,
			[]string{"spec.steps[0].namespaceSelector.matchExpressions[0].operator: Invalid value:", "not a valid selector operator"}},
		{"a right-to-left override in a key", `{"matchLabels":{"\u202estage":"canary"}}`,
			[]string{`Invalid value: "\u202estage"`}},
		{"20,000 expressions that do not parse", `{"matchExpressions":[` + strings.TrimSuffix(strings.Repeat(`{"key":"k","operator":"In"},`, 20000), ",") + `]}`,
			[]string{"spec.steps[0].namespaceSelector.matchExpressions[19].values", "20000 errors in all, the first 20 above"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			object := rolloutPolicyJSON(`{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"},"steps":[{"namespaceSelector":` + tc.selector + `}]}`)
			resp := loggedDecisions{v}.Handle(context.Background(), rolloutPolicyRequest(object, "", false))
			g.Expect(resp.Allowed).To(BeFalse())
			g.Expect(admissionfuzz.Response(resp.AdmissionResponse)).To(Succeed())
			g.Expect(len(resp.Result.Message)).To(BeNumerically("<", 8<<10))
			for _, s := range tc.says {
				g.Expect(resp.Result.Message).To(ContainSubstring(s))
			}
		})
	}
}
