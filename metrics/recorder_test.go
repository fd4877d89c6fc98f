package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flagplane/flagplane/topology"
)

func newRecorder(t *testing.T) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	r, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

func TestRegisteringTwiceFails(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	_, err := New(reg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = New(reg)
	g.Expect(err).To(MatchError(ContainSubstring("registering flagplane's metrics")))
}

func TestEventsAndWrites(t *testing.T) {
	g := NewWithT(t)
	r, _ := newRecorder(t)
	r.Event("FeatureFlag", "spec-changed")
	r.Event("FeatureFlag", "spec-changed")
	r.Event("Deployment", "labels-changed")
	r.Write("ConfigMap", "apply")
	g.Expect(testutil.ToFloat64(r.events.WithLabelValues("FeatureFlag", "spec-changed"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(r.events.WithLabelValues("Deployment", "labels-changed"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(r.writes.WithLabelValues("ConfigMap", "apply"))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(r.events)).To(Equal(2))
}

func TestDelta(t *testing.T) {
	cm := topology.ConfigMapKey(topology.FlagSetKey("a", "f"), "b")
	w1 := topology.WorkloadKey(topology.KindDeployment, "b", "web")
	w2 := topology.WorkloadKey(topology.KindDeployment, "b", "api")
	s := topology.SourceKey("b", "s")
	flagd := topology.FlagdKey("b", "edge")
	policy := topology.SourcePolicyKey("b", "defaults")

	tests := []struct {
		name      string
		deltas    []topology.Delta
		wantCount uint64
		wantSum   float64
		wantKeys  map[string]float64
	}{
		{name: "empty deltas are not observed", deltas: []topology.Delta{{}}, wantKeys: map[string]float64{}},
		{
			name: "sizes and outputs",
			deltas: []topology.Delta{
				delta(cm, w1, w2),
				delta(s, flagd, policy),
			},
			wantCount: 2, wantSum: 6,
			wantKeys: map[string]float64{"configmap": 1, "workload": 2, "source": 1, "flagd": 1, "sourcepolicy": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, reg := newRecorder(t)
			for _, d := range tt.deltas {
				r.Delta(d)
			}
			h := histogram(g, reg, "flagplane_delta_size")
			g.Expect(h.GetSampleCount()).To(Equal(tt.wantCount))
			g.Expect(h.GetSampleSum()).To(Equal(tt.wantSum))
			g.Expect(testutil.CollectAndCount(r.deltaKeys)).To(Equal(len(tt.wantKeys)))
			for output, n := range tt.wantKeys {
				g.Expect(testutil.ToFloat64(r.deltaKeys.WithLabelValues(output))).To(Equal(n), output)
			}
		})
	}
}

func TestReconciled(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRecorder(t)
	r.Reconciled("configmaps", 3*time.Millisecond, nil)
	r.Reconciled("configmaps", 7*time.Millisecond, errors.New("conflict"))
	r.Reconciled("status", time.Millisecond, nil)
	g.Expect(testutil.ToFloat64(r.reconcileErrs.WithLabelValues("configmaps"))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(r.reconcileErrs)).To(Equal(1))
	g.Expect(testutil.CollectAndCount(r.reconcileTime)).To(Equal(3)) // configmaps/success, configmaps/error, status/success
	_ = histogram(g, reg, "flagplane_reconcile_duration_seconds")
}

func TestTopologyNodesAreReadAtScrapeTime(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRecorder(t)
	g.Expect(testutil.CollectAndCount(reg, "flagplane_topology_nodes")).To(Equal(0), "no topology watched yet")

	counts := map[topology.Kind]int{topology.KindFlagSet: 2, topology.KindDeployment: 5}
	r.WatchTopology(func() map[topology.Kind]int { return counts })
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flagplane_topology_nodes Nodes in the topology graph, by kind.
# TYPE flagplane_topology_nodes gauge
flagplane_topology_nodes{kind="Deployment"} 5
flagplane_topology_nodes{kind="FeatureFlag"} 2
`), "flagplane_topology_nodes")).To(Succeed())

	counts = map[topology.Kind]int{topology.KindFlagSet: 3, topology.KindDeployment: 0}
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flagplane_topology_nodes Nodes in the topology graph, by kind.
# TYPE flagplane_topology_nodes gauge
flagplane_topology_nodes{kind="Deployment"} 0
flagplane_topology_nodes{kind="FeatureFlag"} 3
`), "flagplane_topology_nodes")).To(Succeed())
}

func TestSyncSubscribers(t *testing.T) {
	g := NewWithT(t)
	r, _ := newRecorder(t)
	r.SyncSubscribed("shop/flags")
	r.SyncSubscribed("shop/flags")
	r.SyncSubscribed("team/other")
	r.SyncUnsubscribed("shop/flags", "credential_expired")
	r.SyncRefused("Unauthenticated")
	r.SyncRefused("Unauthenticated")
	r.SyncRefused("PermissionDenied")
	g.Expect(testutil.ToFloat64(r.subscribers.WithLabelValues("shop/flags"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(r.subscriptions.WithLabelValues("shop/flags"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(r.subscribers.WithLabelValues("team/other"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(r.streamEnds.WithLabelValues("credential_expired"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(r.refusals.WithLabelValues("Unauthenticated"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(r.refusals.WithLabelValues("PermissionDenied"))).To(Equal(1.0))
}

func TestSyncTokenReviews(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRecorder(t)
	for _, result := range []string{"reviewed", "limited", "limited", "cached"} {
		r.SyncTokenReview(result)
	}
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flagplane_sync_token_reviews_total Service-account tokens presented to the built-in sync server, by how they were checked: reviewed (a TokenReview was made), cached and cached_refusal (an earlier review's answer), shared (a concurrent review of the same token), limited (refused by the TokenReview rate limit), rejected (refused by its form without a review).
# TYPE flagplane_sync_token_reviews_total counter
flagplane_sync_token_reviews_total{result="cached"} 1
flagplane_sync_token_reviews_total{result="limited"} 2
flagplane_sync_token_reviews_total{result="reviewed"} 1
`), "flagplane_sync_token_reviews_total")).To(Succeed())
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.Event("k", "e")
	r.Delta(delta(topology.SourceKey("a", "b")))
	r.Reconciled("w", time.Second, nil)
	r.Write("k", "v")
	r.WatchTopology(nil)
	r.SyncSubscribed("s")
	r.SyncUnsubscribed("s", "left")
	r.SyncRefused("Unauthenticated")
	r.SyncTokenReview("reviewed")
}

func TestMetricsFollowPrometheusConventions(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRecorder(t)
	r.Event("FeatureFlag", "created")
	r.Delta(delta(topology.SourceKey("a", "b")))
	r.Reconciled("status", time.Millisecond, nil)
	r.Write("status", "status")
	r.WatchTopology(func() map[topology.Kind]int { return map[topology.Kind]int{topology.KindSource: 1} })
	r.SyncSubscribed("a/b")
	r.SyncUnsubscribed("a/b", "left")
	r.SyncRefused("PermissionDenied")
	r.SyncTokenReview("limited")
	problems, err := testutil.GatherAndLint(reg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(problems).To(BeEmpty())
}

// histogram returns the single histogram of a metric family.
func histogram(g Gomega, reg *prometheus.Registry, name string) interface {
	GetSampleCount() uint64
	GetSampleSum() float64
} {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == name {
			g.Expect(f.GetMetric()).NotTo(BeEmpty())
			return f.GetMetric()[0].GetHistogram()
		}
	}
	g.Expect(name).To(BeEmpty(), "metric family not gathered")
	return nil
}

func TestUnregisterLetsANewRecorderRegister(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	r, err := New(reg)
	g.Expect(err).NotTo(HaveOccurred())
	r.WatchTopology(func() map[topology.Kind]int { return map[topology.Kind]int{topology.KindSource: 1} })
	r.Unregister(reg)
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(families).To(BeEmpty())
	_, err = New(reg)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestPendingKeysAreReadAtScrapeTime(t *testing.T) {
	g := NewWithT(t)
	r, reg := newRecorder(t)
	g.Expect(testutil.CollectAndCount(reg, "flagplane_pending_keys")).To(Equal(0), "nothing watched yet")
	pending := 3
	r.WatchPending(func() int { return pending })
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flagplane_pending_keys Keys of the workflow queues that wait, are being reconciled or wait for a retry: 0 when the manager has nothing left to do.
# TYPE flagplane_pending_keys gauge
flagplane_pending_keys 3
`), "flagplane_pending_keys")).To(Succeed())
	pending = 0
	g.Expect(testutil.ToFloat64(pendingCollector{r})).To(BeZero())
}

func delta(keys ...topology.Key) topology.Delta {
	var d topology.Delta
	d.Add(keys...)
	return d
}
