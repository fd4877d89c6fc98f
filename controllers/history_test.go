package controllers

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/history"
)

// drainHistory takes every key off the history queue.
func drainHistory(c *Controller) []topology.Key {
	var out []topology.Key
	for c.history.Len() > 0 {
		k, _ := c.history.queue.Get()
		c.history.queue.Done(k)
		c.history.queue.Forget(k)
		out = append(out, k)
	}
	return out
}

// TestHistoryIsFedByTheGraph: a FeatureFlag comes onto the history queue
// from the Delta of its edit, once the graph holds its rendering, and
// from what the graph does not read but the history does: its
// annotations, its revisions, the rollout policies that target it. A
// status write alone brings nothing.
func TestHistoryIsFedByTheGraph(t *testing.T) {
	g := NewWithT(t)
	c := routingController()
	c.opts.History = &history.Reconciler{Graph: c.topo}
	none := func(context.Context, topology.Key) error { return nil }
	c.history = newWorkQueue(logr.Discard(), "history", 1, none)
	c.rollouts = newWorkQueue(logr.Discard(), "rollouts", 1, none)
	var ffLine graphKind[*v1beta1.FeatureFlag]
	var revLine graphKind[*deliveryv1alpha1.FeatureFlagRevision]
	var policyLine graphKind[*deliveryv1alpha1.FeatureFlagRolloutPolicy]
	for _, k := range c.kinds(nil) {
		switch k := k.(type) {
		case graphKind[*v1beta1.FeatureFlag]:
			ffLine = k
		case graphKind[*deliveryv1alpha1.FeatureFlagRevision]:
			revLine = k
		case graphKind[*deliveryv1alpha1.FeatureFlagRolloutPolicy]:
			policyLine = k
		}
	}
	key := topology.FlagSetKey("shop", "flags")

	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: "ff", ResourceVersion: "1", Generation: 1}}
	ffLine.handler(c).onAdd(ff)
	g.Expect(drainHistory(c)).To(ConsistOf(key), "the Delta of its creation")
	_, ok := c.topo.Snapshot().RenderedOf(ff)
	g.Expect(ok).To(BeTrue(), "the graph renders it by then")

	status := ff.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.Revision = "abc"
	ffLine.handler(c).onUpdate(ff, status)
	g.Expect(drainHistory(c)).To(BeEmpty(), "a status write")

	annotated := status.DeepCopy()
	annotated.ResourceVersion = "3"
	annotated.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "3"}
	ffLine.handler(c).onUpdate(status, annotated)
	g.Expect(drainHistory(c)).To(ConsistOf(key), "its history limit")

	rev := &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags-1", ResourceVersion: "4"}}
	rev.Spec.FlagSet, rev.Spec.Revision = "flags", "abc"
	revLine.handler(c).onAdd(rev)
	g.Expect(drainHistory(c)).To(ContainElement(key), "a revision of it")
	adopted := rev.DeepCopy()
	adopted.ResourceVersion = "5"
	adopted.OwnerReferences = []metav1.OwnerReference{{Name: "flags", UID: "ff"}}
	revLine.handler(c).onUpdate(rev, adopted)
	g.Expect(drainHistory(c)).To(ConsistOf(key), "a revision adopted")

	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "staged", ResourceVersion: "6"}}
	p.Spec.TargetRef = deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "flags"}
	policyLine.handler(c).onAdd(p)
	g.Expect(drainHistory(c)).To(ContainElement(key), "a rollout policy that targets it")
	withStatus := p.DeepCopy()
	withStatus.ResourceVersion = "7"
	withStatus.Status.Phase = deliveryv1alpha1.PhaseProgressing
	policyLine.handler(c).onUpdate(p, withStatus)
	g.Expect(drainHistory(c)).To(ContainElement(key), "its status, which names the revisions to keep")
}
