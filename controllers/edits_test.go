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
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	key := topology.FlagSetKey("shop", "checkout")
	holding := func(ns, defaultVariant string) *corev1.ConfigMap {
		content, _, err := flagsets.Serve(fixtures.FlagSet("shop", "checkout", defaultVariant))
		g.Expect(err).NotTo(HaveOccurred())
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: topology.ConfigMapName(key)},
			Data: map[string]string{topology.ConfigMapDataKey(key): content}}
	}
	_, err := topo.UpsertFlagSet(fixtures.FlagSet("shop", "checkout", "off"))
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := e.delivered(topo.Snapshot(), key, holding("shop", "off"))
	g.Expect(ok).To(BeFalse(), "no edit seen yet")

	on := fixtures.FlagSet("shop", "checkout", "on")
	e.edited(on)
	_, ok = e.delivered(topo.Snapshot(), key, holding("shop", "on"))
	g.Expect(ok).To(BeFalse(), "the graph has not taken the edit yet")
	_, err = topo.UpsertFlagSet(on)
	g.Expect(err).NotTo(HaveOccurred())
	v := topo.Snapshot()
	time.Sleep(2 * time.Millisecond)
	_, ok = e.delivered(v, key, holding("shop", "off"))
	g.Expect(ok).To(BeFalse(), "the ConfigMap still holds the content before the edit")
	took, ok := e.delivered(v, key, holding("shop", "on"))
	g.Expect(ok).To(BeTrue())
	g.Expect(took).To(BeNumerically(">=", 2*time.Millisecond))
	_, ok = e.delivered(v, key, holding("shop", "on"))
	g.Expect(ok).To(BeFalse(), "each ConfigMap once per edit")
	_, ok = e.delivered(v, key, holding("web", "on"))
	g.Expect(ok).To(BeTrue(), "another namespace's copy")

	// A later object of the same spec (a status write) is the same edit.
	labelled := on.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	_, err = topo.UpsertFlagSet(labelled)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok = e.delivered(topo.Snapshot(), key, holding("api", "on"))
	g.Expect(ok).To(BeTrue(), "a third namespace's copy, read from a later view")

	e.forget(key)
	_, ok = e.delivered(topo.Snapshot(), key, holding("ops", "on"))
	g.Expect(ok).To(BeFalse())
}
