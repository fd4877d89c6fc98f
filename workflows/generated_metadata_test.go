package workflows

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestManagedLabels: the informers select the objects flagplane generates
// by its label alone.
func TestManagedLabels(t *testing.T) {
	NewWithT(t).Expect(ManagedLabels()).To(Equal(map[string]string{v1beta1.LabelManagedBy: v1beta1.ManagedByValue}))
}

func TestGeneratedMetadataValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(GeneratedMetadata{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x/y": "any value at all"}}.Validate()).To(Succeed())
	g.Expect(GeneratedMetadata{Labels: map[string]string{v1beta1.LabelManagedBy: "someone"}}.Validate()).To(MatchError(ContainSubstring("is flagplane's")))
	g.Expect(GeneratedMetadata{Labels: map[string]string{"a": "not a value"}}.Validate()).To(MatchError(ContainSubstring(`value "not a value"`)))
	g.Expect(GeneratedMetadata{Annotations: map[string]string{"bad key": ""}}.Validate()).To(MatchError(ContainSubstring(`key "bad key"`)))
}
