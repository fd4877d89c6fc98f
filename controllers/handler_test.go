package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestTypedHandler(t *testing.T) {
	g := NewWithT(t)
	var adds, updates, deletes []string
	h := typedHandler[*corev1.ConfigMap]{
		onAdd:    func(cm *corev1.ConfigMap) { adds = append(adds, cm.Name) },
		onUpdate: func(_, n *corev1.ConfigMap) { updates = append(updates, n.Name) },
		onDelete: func(cm *corev1.ConfigMap) { deletes = append(deletes, cm.Name) },
	}
	cm := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}

	h.OnAdd(cm("a", "1"), true)
	h.OnAdd(&corev1.Secret{}, false) // another type is ignored
	h.OnUpdate(cm("a", "1"), cm("a", "1"))
	h.OnUpdate(cm("a", "1"), cm("a", "2"))
	h.OnDelete(cm("a", "2"))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "b", Obj: cm("b", "3")})

	g.Expect(adds).To(Equal([]string{"a"}))
	g.Expect(updates).To(Equal([]string{"a"}), "a resync (same resourceVersion) is not an update")
	g.Expect(deletes).To(Equal([]string{"a", "b"}), "tombstones are unwrapped")
}

func TestSourceChange(t *testing.T) {
	base := &v1beta1.FeatureFlagSource{}
	base.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web"}}

	settings := base.DeepCopy()
	settings.Spec.DebugLogging = ptr.To(true)
	retargeted := base.DeepCopy()
	retargeted.Spec.TargetRefs[0].Name = "api"
	selector := base.DeepCopy()
	selector.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}

	status := base.DeepCopy()
	status.Status.ObservedGeneration = 3

	g := NewWithT(t)
	g.Expect(sourceChange(base, status)).To(BeEmpty(), "status is not the graph's")
	g.Expect(sourceChange(base, settings)).To(Equal("settings-changed"))
	g.Expect(sourceChange(base, retargeted)).To(Equal("targets-changed"))
	g.Expect(sourceChange(base, selector)).To(Equal("targets-changed"))
}
