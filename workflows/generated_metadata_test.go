package workflows

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestManagedLabels: the informers select the objects flagplane generates
// by its label alone; a manager started without --managed-by labels them
// flagplane.
func TestManagedLabels(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ManagedLabels()).To(Equal(map[string]string{v1beta1.LabelManagedBy: v1beta1.ManagedByValue}))
	g.Expect(GeneratedMetadata{}.ManagedLabels()).To(Equal(ManagedLabels()), "the zero value is the default")
	g.Expect(GeneratedMetadata{ManagedBy: "open-feature-operator"}.ManagedLabels()).To(Equal(map[string]string{v1beta1.LabelManagedBy: "open-feature-operator"}))
}

// TestOwns: an object is flagplane's when its managed-by value is the
// configured one or flagplane's default (what it made before the value
// changed), and only then; the informers' selector holds exactly those.
func TestOwns(t *testing.T) {
	const ofo = "open-feature-operator"
	for _, tc := range []struct {
		name      string
		managedBy string
		labels    map[string]string
		want      bool
	}{
		{"default: its own", "", map[string]string{v1beta1.LabelManagedBy: "flagplane"}, true},
		{"default: the flag's default spelled out", "flagplane", map[string]string{v1beta1.LabelManagedBy: "flagplane"}, true},
		{"default: the OpenFeature Operator's is not its", "", map[string]string{v1beta1.LabelManagedBy: ofo}, false},
		{"default: another tool's", "", map[string]string{v1beta1.LabelManagedBy: "Helm"}, false},
		{"default: unlabelled", "", map[string]string{"app": "x"}, false},
		{"default: no labels", "", nil, false},
		{"default: an empty value", "", map[string]string{v1beta1.LabelManagedBy: ""}, false},
		{"open-feature-operator: its own", ofo, map[string]string{v1beta1.LabelManagedBy: ofo}, true},
		{"open-feature-operator: what it made as flagplane, adopted", ofo, map[string]string{v1beta1.LabelManagedBy: "flagplane"}, true},
		{"open-feature-operator: another tool's", ofo, map[string]string{v1beta1.LabelManagedBy: "Helm"}, false},
		{"open-feature-operator: unlabelled", ofo, nil, false},
		{"another value: the OpenFeature Operator's is not its", "team-a", map[string]string{v1beta1.LabelManagedBy: ofo}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			gen := GeneratedMetadata{ManagedBy: tc.managedBy}
			g.Expect(gen.Owns(tc.labels)).To(Equal(tc.want))
			g.Expect(gen.Selector().Matches(labels.Set(tc.labels))).To(Equal(tc.want), "the informers' selector: %s", gen.Selector())
		})
	}
}

// TestObjectLabels: the configured value goes on what is generated, and
// --labels cannot replace it.
func TestObjectLabels(t *testing.T) {
	g := NewWithT(t)
	gen := GeneratedMetadata{ManagedBy: "open-feature-operator", Labels: map[string]string{"team": "a"}}
	g.Expect(gen.ObjectLabels()).To(Equal(map[string]string{"team": "a", v1beta1.LabelManagedBy: "open-feature-operator"}))
	g.Expect(GeneratedMetadata{}.ObjectLabels()).To(Equal(ManagedLabels()))
}

func TestGeneratedMetadataValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(GeneratedMetadata{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x/y": "any value at all"}}.Validate()).To(Succeed())
	g.Expect(GeneratedMetadata{ManagedBy: "open-feature-operator"}.Validate()).To(Succeed())
	g.Expect(GeneratedMetadata{ManagedBy: "flag plane"}.Validate()).To(MatchError(ContainSubstring(`--managed-by "flag plane" is not a label value`)))
	g.Expect(GeneratedMetadata{ManagedBy: "-flagplane"}.Validate()).To(MatchError(ContainSubstring("is not a label value")))
	g.Expect(GeneratedMetadata{Labels: map[string]string{v1beta1.LabelManagedBy: "someone"}}.Validate()).To(MatchError(ContainSubstring("is flagplane's")))
	g.Expect(GeneratedMetadata{Labels: map[string]string{"a": "not a value"}}.Validate()).To(MatchError(ContainSubstring(`value "not a value"`)))
	g.Expect(GeneratedMetadata{Annotations: map[string]string{"bad key": ""}}.Validate()).To(MatchError(ContainSubstring(`key "bad key"`)))
}
