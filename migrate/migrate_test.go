package migrate

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

func TestManagedByOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"none: the default", []string{"--leader-elect"}, "flagplane"},
		{"with =", []string{"--leader-elect", "--managed-by=open-feature-operator"}, "open-feature-operator"},
		{"as the next argument", []string{"--managed-by", "open-feature-operator", "--leader-elect"}, "open-feature-operator"},
		{"one dash", []string{"-managed-by=team-a"}, "team-a"},
		{"the last one wins", []string{"--managed-by=a", "--managed-by=b"}, "b"},
		{"another flag that starts alike", []string{"--managed-by-other=x"}, "flagplane"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(managedByOf([]corev1.Container{{Name: "manager", Args: tc.args}})).To(Equal(tc.want))
		})
	}
}

// TestManagedBy: the value is read from flagplane's managers; managers
// that disagree are refused rather than guessed between.
func TestManagedBy(t *testing.T) {
	manager := func(ns string, args ...string) client.Object {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagplane-manager"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "manager", Args: args}}}}}}
	}
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Args: []string{"--managed-by=app"}}}}}}}
	for _, tc := range []struct {
		name    string
		objs    []client.Object
		want    string
		wantErr string
	}{
		{"no manager yet", []client.Object{other}, "flagplane", ""},
		{"the default", []client.Object{manager("flagplane-system", "--leader-elect"), other}, "flagplane", ""},
		{"the OpenFeature Operator's", []client.Object{manager("flagplane-system", "--managed-by=open-feature-operator"), other}, "open-feature-operator", ""},
		{"two that agree", []client.Object{manager("team-a", "--managed-by=x"), manager("team-b", "--managed-by=x")}, "x", ""},
		{"two that disagree", []client.Object{manager("team-a", "--managed-by=x"), manager("team-b")}, "",
			"app.kubernetes.io/managed-by=flagplane in team-b; x in team-a): say which value is this install's with --managed-by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Scheme()
			g.Expect(err).NotTo(HaveOccurred())
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.objs...).
				WithIndex(&appsv1.Deployment{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).Build()
			got, err := ManagedBy(context.Background(), c)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
