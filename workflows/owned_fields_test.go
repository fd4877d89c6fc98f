package workflows

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFieldsMismatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want any
		path      string
	}{
		{"equal", map[string]any{"a": int64(1)}, map[string]any{"a": 1}, ""},
		{"extra fields are others'", map[string]any{"a": "x", "b": "y"}, map[string]any{"a": "x"}, ""},
		{"missing", map[string]any{}, map[string]any{"a": "x"}, ".a"},
		{"other value", map[string]any{"a": map[string]any{"b": "x"}}, map[string]any{"a": map[string]any{"b": "y"}}, ".a.b"},
		{"list elements by index", map[string]any{"l": []any{map[string]any{"n": "a", "d": 1}}}, map[string]any{"l": []any{map[string]any{"n": "a"}}}, ""},
		{"list of another length", map[string]any{"l": []any{"a", "b"}}, map[string]any{"l": []any{"a"}}, ".l"},
		{"a scalar where a map is wanted", map[string]any{"a": "x"}, map[string]any{"a": map[string]any{}}, ".a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(FieldsMismatch(tc.got, tc.want)).To(Equal(tc.path))
		})
	}
}

func TestOwnsUndesiredFields(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	owned := `{"f:metadata":{"f:annotations":{"f:a":{},"f:b":{}}},"f:spec":{"f:tls":{},"f:rules":{}}}`
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a": "1", "b": "2"}}, "spec": map[string]any{"tls": []any{}, "rules": []any{}}}
	g := NewWithT(t)
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("flagplane", metav1.ManagedFieldsOperationApply, owned)}, want)).To(BeEmpty())
	delete(want["metadata"].(map[string]any)["annotations"].(map[string]any), "b")
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("flagplane", metav1.ManagedFieldsOperationApply, owned)}, want)).To(Equal(".metadata.annotations.b"))
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("kubectl", metav1.ManagedFieldsOperationApply, owned)}, want)).To(BeEmpty(), "another manager's fields are its own")
	delete(want["spec"].(map[string]any), "tls")
	want["metadata"].(map[string]any)["annotations"].(map[string]any)["b"] = "2"
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("flagplane", metav1.ManagedFieldsOperationApply, owned)}, want)).To(Equal(".spec.tls"))
}
