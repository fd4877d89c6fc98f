package history

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestFieldManager(t *testing.T) {
	at := func(sec int) *metav1.Time { return &metav1.Time{Time: time.Unix(1_800_000_000+int64(sec), 0)} }
	update, apply := metav1.ManagedFieldsOperationUpdate, metav1.ManagedFieldsOperationApply
	tests := []struct {
		name     string
		entries  []metav1.ManagedFieldsEntry
		previous string
		want     string
	}{
		{name: "no managedFields: no author", want: ""},
		{name: "the one writer", entries: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: update, Time: at(0)}},
			want: "kubectl-client-side-apply"},
		{name: "the newest write, wherever it is in the list", entries: []metav1.ManagedFieldsEntry{
			{Manager: "argocd-controller", Operation: apply, Time: at(5)},
			{Manager: "kubectl-edit", Operation: update, Time: at(9)},
			{Manager: "kubectl-create", Operation: update, Time: at(1)},
		}, want: "kubectl-edit"},
		{name: "a status write is not the spec's", entries: []metav1.ManagedFieldsEntry{
			{Manager: "alice-edit", Operation: update, Time: at(3)},
			{Manager: "flagplane", Operation: apply, Time: at(8), Subresource: "status"},
		}, want: "alice-edit"},
		{name: "only status writes: no author", entries: []metav1.ManagedFieldsEntry{
			{Manager: "flagplane", Operation: apply, Time: at(8), Subresource: "status"},
		}, want: ""},
		{name: "an entry without a time is the oldest", entries: []metav1.ManagedFieldsEntry{
			{Manager: "before-times", Operation: update},
			{Manager: "flagplane-rollback", Operation: update, Time: at(0)},
		}, want: "flagplane-rollback"},
		{name: "the same second: Update after Apply, as the API server lists them", entries: []metav1.ManagedFieldsEntry{
			{Manager: "zed", Operation: apply, Time: at(4)},
			{Manager: "kubectl-edit", Operation: update, Time: at(4)},
		}, want: "kubectl-edit"},
		{name: "the same second and operation: the last manager by name", entries: []metav1.ManagedFieldsEntry{
			{Manager: "bob", Operation: update, Time: at(4)},
			{Manager: "alice", Operation: update, Time: at(4)},
		}, want: "bob"},
		{name: "the same second: not the previous revision's author", previous: "bob", entries: []metav1.ManagedFieldsEntry{
			{Manager: "bob", Operation: update, Time: at(4)},
			{Manager: "alice", Operation: update, Time: at(4)},
		}, want: "alice"},
		{name: "the same second, Apply against Update: not the previous revision's author", previous: "kubectl-edit", entries: []metav1.ManagedFieldsEntry{
			{Manager: "argocd-controller", Operation: apply, Time: at(4)},
			{Manager: "kubectl-edit", Operation: update, Time: at(4)},
		}, want: "argocd-controller"},
		{name: "a later second wins over the previous revision's author", previous: "bob", entries: []metav1.ManagedFieldsEntry{
			{Manager: "alice", Operation: update, Time: at(3)},
			{Manager: "bob", Operation: update, Time: at(4)},
		}, want: "bob"},
		{name: "a name longer than spec.fieldManager takes is cut", entries: []metav1.ManagedFieldsEntry{
			{Manager: strings.Repeat("m", 130), Operation: update, Time: at(0)},
		}, want: strings.Repeat("m", 128)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(FieldManager(tt.entries, tt.previous)).To(Equal(tt.want))
			// The order of the list does not matter.
			reversed := make([]metav1.ManagedFieldsEntry, len(tt.entries))
			for i, e := range tt.entries {
				reversed[len(tt.entries)-1-i] = e
			}
			g.Expect(FieldManager(reversed, tt.previous)).To(Equal(tt.want))
		})
	}
}

// TestCreatedBy: the author is the annotation flagplane's webhook keeps,
// when the webhook is served; a FeatureFlag without it (written while the
// webhook was not installed) and a manager without webhooks record none,
// whatever the field manager.
func TestCreatedBy(t *testing.T) {
	g := NewWithT(t)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{
		Annotations:   map[string]string{deliveryv1alpha1.SpecAuthorAnnotation: "alice"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "flagplane-rollback", Operation: metav1.ManagedFieldsOperationUpdate}},
	}}
	g.Expect(CreatedBy(ff, true)).To(Equal("alice"))
	g.Expect(CreatedBy(ff, false)).To(BeEmpty(), "nothing vouches for the annotation")
	long := "system:serviceaccount:" + strings.Repeat("n", 63) + ":" + strings.Repeat("s", 253)
	ff.Annotations[deliveryv1alpha1.SpecAuthorAnnotation] = long
	g.Expect(CreatedBy(ff, true)).To(Equal(long), "the longest ServiceAccount fits")
	ff.Annotations[deliveryv1alpha1.SpecAuthorAnnotation] = strings.Repeat("u", 600)
	g.Expect(CreatedBy(ff, true)).To(Equal(strings.Repeat("u", 512)))

	delete(ff.Annotations, deliveryv1alpha1.SpecAuthorAnnotation)
	g.Expect(CreatedBy(ff, true)).To(BeEmpty())
	r := Desired(ff, strings.Repeat("a", 32), 1, "", true)
	g.Expect(r.Spec.CreatedBy).To(BeEmpty())
	g.Expect(r.Spec.FieldManager).To(Equal("flagplane-rollback"), "the field manager is recorded all the same")
}

func TestCut(t *testing.T) {
	g := NewWithT(t)
	g.Expect(cut("short", 10)).To(Equal("short"))
	g.Expect(cut("abcdef", 3)).To(Equal("abc"))
	// "é" is two bytes: a cut within it keeps the character out.
	g.Expect(cut("aé", 2)).To(Equal("a"))
	g.Expect(cut("aé", 3)).To(Equal("aé"))
}
