package migrate

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestReport(t *testing.T) {
	g := NewWithT(t)
	r := &Report{Findings: []Finding{
		{Object: Object{Kind: "MutatingWebhookConfiguration", Name: "open-feature-operator-mutating-webhook-configuration"}, Action: Remove,
			What: "its injector", Means: strings.Repeat("word ", 40)},
		{Object: Object{Kind: "ConfigMap", Namespace: "shop", Name: "flags"}, Action: InUse, UsedBy: []string{"shop/a", "shop/b"}, Do: "roll them"},
		{Object: Object{Kind: "FeatureFlags"}, Count: 3, Action: TakenOver},
	}}
	g.Expect(r.Leftovers()).To(HaveLen(2))
	g.Expect(r.ToRemove()).To(HaveLen(1))
	var out bytes.Buffer
	r.Write(&out, false)
	text := out.String()
	g.Expect(text).To(HavePrefix("The OpenFeature Operator's leftovers (2):\n"))
	g.Expect(text).To(ContainSubstring("\n  remove  MutatingWebhookConfiguration open-feature-operator-mutating-webhook-configuration\n"))
	g.Expect(text).To(ContainSubstring("\n  in use  ConfigMap shop/flags\n"))
	g.Expect(text).To(ContainSubstring("used by: shop/a, shop/b"))
	g.Expect(text).To(ContainSubstring("Taken over as they are: 3 FeatureFlags."))
	g.Expect(text).To(ContainSubstring("Run flagplane migrate --apply to remove the 1 marked remove."))
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "          ") {
			g.Expect(len(line)).To(BeNumerically("<=", 100), "wrapped: %q", line)
		}
	}

	out.Reset()
	(&Report{Findings: []Finding{r.Findings[2]}}).Write(&out, false)
	g.Expect(out.String()).To(HavePrefix("Nothing of the OpenFeature Operator is left.\n"))
}

func TestApplyRefusesWhileTheManagerRuns(t *testing.T) {
	g := NewWithT(t)
	s, err := Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	c := fake.NewClientBuilder().WithScheme(s).Build()
	_, err = Apply(context.Background(), c, &Report{ManagerRunning: true, Findings: []Finding{{Action: Remove}}})
	g.Expect(err).To(MatchError(ErrManagerRunning))
}

func TestIsFlagplaneCRD(t *testing.T) {
	g := NewWithT(t)
	version := func(status apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1beta1", Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": status}}}}}}}
	}
	g.Expect(isFlagplaneCRD(version(apiextensionsv1.JSONSchemaProps{Type: "object"}))).To(BeFalse(), "the OpenFeature Operator's: an empty status")
	g.Expect(isFlagplaneCRD(version(apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"conditions": {Type: "array"}}}))).To(BeTrue())
}
