package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// TestConfigMapEventQueuesOnlySourcesItMayChange: the event of a ConfigMap
// that holds its flag set's current content passes over a source that
// reports Programmed (its status, which visits every target, would not
// change); every other event queues the source: a ConfigMap behind, a
// deleted one, a source not Programmed, or one whose reconciliation is
// queued or under way (it may have read the cache before the ConfigMap).
func TestConfigMapEventQueuesOnlySourcesItMayChange(t *testing.T) {
	ctx := context.Background()
	src := topology.SourceKey("ns", "src")
	for _, tc := range []struct {
		name       string
		behind     bool
		deleted    bool
		notProgram bool
		pending    bool
		queued     bool
	}{
		{name: "current content, source Programmed", queued: false},
		{name: "content behind", behind: true, queued: true},
		{name: "deleted", deleted: true, queued: true},
		{name: "source not Programmed", notProgram: true, queued: true},
		{name: "source on the queue already, or being reconciled", pending: true, queued: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEditBench(t, 3)
			if tc.notProgram {
				s := &v1beta1.FeatureFlagSource{}
				g.Expect(e.cluster.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "src"}, s)).To(Succeed())
				meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1beta1.ConditionProgrammed,
					Status: metav1.ConditionFalse, Reason: v1beta1.ReasonPending})
				g.Expect(e.cluster.Update(ctx, s)).To(Succeed())
			}
			if tc.pending {
				// Its reconciliation may have read the cache before the ConfigMap.
				e.c.statuses.pending.added(src)
			}
			cm := &corev1.ConfigMap{}
			g.Expect(e.cluster.Get(ctx, e.cm, cm)).To(Succeed())
			if tc.behind {
				cm.Data[topology.ConfigMapDataKey(topology.FlagSetKey("ns", "flags"))] = "{}"
			}
			if tc.deleted {
				e.c.onConfigMapDeleted(cm)
			} else {
				e.c.onConfigMapEdited(cm)
			}
			g.Expect(drain(e.c)[topology.KindSource] != nil).To(Equal(tc.queued), "%s queued", src)
		})
	}
}
