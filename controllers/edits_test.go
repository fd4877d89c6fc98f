package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

func TestEditsTimeEachConfigMapOnce(t *testing.T) {
	g := NewWithT(t)
	var e edits
	key := topology.FlagSetKey("shop", "checkout")
	holding := func(ns, defaultVariant string) *corev1.ConfigMap {
		content, err := flagsets.Render(fixtures.FlagSet("shop", "checkout", defaultVariant))
		g.Expect(err).NotTo(HaveOccurred())
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: topology.ConfigMapName(key)},
			Data: map[string]string{topology.ConfigMapDataKey(key): content}}
	}
	_, ok := e.delivered(key, holding("shop", "off"))
	g.Expect(ok).To(BeFalse(), "no edit seen yet")

	e.edited(fixtures.FlagSet("shop", "checkout", "on"))
	time.Sleep(2 * time.Millisecond)
	_, ok = e.delivered(key, holding("shop", "off"))
	g.Expect(ok).To(BeFalse(), "the ConfigMap still holds the content before the edit")
	took, ok := e.delivered(key, holding("shop", "on"))
	g.Expect(ok).To(BeTrue())
	g.Expect(took).To(BeNumerically(">=", 2*time.Millisecond))
	_, ok = e.delivered(key, holding("shop", "on"))
	g.Expect(ok).To(BeFalse(), "each ConfigMap once per edit")
	_, ok = e.delivered(key, holding("web", "on"))
	g.Expect(ok).To(BeTrue(), "another namespace's copy")

	e.forget(key)
	_, ok = e.delivered(key, holding("api", "on"))
	g.Expect(ok).To(BeFalse())
}
