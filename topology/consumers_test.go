package topology

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
)

// ConsumersOf answers, from one pass, what ServedFor, RevisionFor,
// ConfigMapNeeded and Readers answer namespace by namespace: for every
// namespace the graph or the plan knows, and for any other (Elsewhere).
func TestConsumersOfIsWhatTheViewAnswers(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	topo := stagedCluster(t, "v1")
	f := fsK("flags", "flags")
	policy := rolloutPolicy("flags", "staged", "flags",
		deliveryv1alpha1.RolloutStep{NamespaceSelector: matchLabels("stage", "canary")},
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)},
	)
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v1", deliveryv1alpha1.PhaseCompleted, 2)))
	topo.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "v2")))
	v := topo.Snapshot()

	c := v.ConsumersOf(f)
	g.Expect(c.InGraph).To(BeTrue())
	g.Expect(c.Staged).To(BeTrue())
	g.Expect(c.ConfigMaps).To(Equal(v.ConsumerNamespaces(f)))
	g.Expect(c.ConfigMapName).To(Equal(ConfigMapName(f)))
	g.Expect(c.ConfigMapDataKey).To(Equal(ConfigMapDataKey(f)))
	readers, _ := v.Readers(f)
	g.Expect(c.Readers).To(Equal(readers), "no reader reads it with the kubernetes provider")
	plan := v.RolloutPlan(f)
	for _, ns := range []string{"a", "b", "c", "d", "elsewhere"} {
		want, _ := v.ServedFor(f, ns)
		p, known := c.Copies[ns]
		if !known {
			p = c.Elsewhere
		}
		g.Expect(known).To(Equal(ns != "elsewhere"), ns)
		g.Expect(p.Served).To(Equal(want), ns)
		g.Expect(p.Revision).To(Equal(plan.RevisionFor(ns)), ns)
		g.Expect(p.ConfigMap).To(Equal(v.ConfigMapNeeded(ConfigMapKey(f, ns))), ns)
	}
	g.Expect(c.Copies["a"].Served.Revision).To(Equal("v2"), "the canary serves the edit")
	g.Expect(c.Copies["b"].Served.Revision).To(Equal("v1"), "the rest the stable revision")
	r, ok := c.Recorded("v1")
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Content).To(Equal(`{"default":"v1"}`))

	gone := v.ConsumersOf(fsK("flags", "gone"))
	g.Expect(gone.InGraph).To(BeFalse())
	g.Expect(gone.Staged).To(BeFalse())
	g.Expect(gone.Copies).To(BeEmpty())
}
