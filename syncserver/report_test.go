package syncserver

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/status"
)

// sendAll does what the streams' goroutines do with their latest state.
func sendAll(h *hub, subs ...*subscriber) {
	for _, s := range subs {
		if u := s.latest.Load(); u != nil && u != denied {
			h.sentTo(s, u)
		}
	}
}

// The report counts, per flag set and subscriber namespace, the streams by
// the revision they were sent (flagsets.Revision of the content, as the
// status calls it): a stream behind, and one sent nothing yet, are told apart.
func TestHubReport(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	h := newHub(w.topo)
	checkout := topology.FlagSetKey("shop", "checkout")
	ff := w.flagSet("shop", "checkout", "off")
	w.source("web", "src", "shop/checkout")
	w.grant("shop", "g", []string{"web"}, nil)
	offContent, err := flagsets.Render(ff)
	g.Expect(err).NotTo(HaveOccurred())
	off := flagsets.Revision(offContent)

	a, b := h.join(checkout, "shop", "c1"), h.join(checkout, "shop", "c2")
	web := h.join(checkout, "web", "c3")
	h.round()
	sendAll(h, a, b, web)
	g.Expect(h.reportChanged.Load()).To(BeTrue())

	on := withDefault(ff, "on")
	w.setFlagSet(on)
	onContent, err := flagsets.Render(on)
	g.Expect(err).NotTo(HaveOccurred())
	h.changed([]topology.Key{checkout})
	h.round()
	sendAll(h, a) // b and web are behind
	late := h.join(checkout, "web", "c4")

	r := h.report("flagplane-0", 10)
	g.Expect(r.Replica).To(Equal("flagplane-0"))
	g.Expect(r.Entries).To(HaveLen(2))
	g.Expect(r.Entries[0]).To(And(HaveField("FlagSetNamespace", "shop"), HaveField("FlagSet", "checkout"), HaveField("Namespace", "shop")))
	g.Expect(revisions(r.Entries[0].Held)).To(Equal(map[string]int32{off: 1, flagsets.Revision(onContent): 1}))
	g.Expect(r.Entries[1].Namespace).To(Equal("web"))
	g.Expect(revisions(r.Entries[1].Held)).To(Equal(map[string]int32{off: 1, "": 1}), "the late stream was sent nothing yet")
	for _, e := range r.Entries {
		for _, held := range e.Held {
			g.Expect(held.Since.Nanosecond()).To(BeZero(), "to the second, as the API server keeps times")
		}
	}

	r = h.report("flagplane-0", 1)
	g.Expect(r.Entries).To(HaveLen(1))
	g.Expect(r.Truncated).To(Equal(1))

	h.leave(a)
	h.leave(b)
	h.leave(web)
	h.leave(late)
	g.Expect(h.report("flagplane-0", 10).Entries).To(BeEmpty())
}

func revisions(held []status.HeldRevision) map[string]int32 {
	out := map[string]int32{}
	for _, h := range held {
		out[h.Revision] = h.Streams
	}
	return out
}

// The reporter writes the report as a labelled ConfigMap of the manager's
// namespace owned by its Pod, only when it changed, and deletes it when no
// stream is left (or the replica stops).
func TestReporterPublishes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w, srv, c := reporterFixture(t)
	h := srv.hub
	writes := 0
	r := &Reporter{Server: srv, Client: countingApplies{Client: c, n: &writes}, Namespace: "flagplane-system", Replica: "flagplane-abc", Owner: "uid-1"}

	g.Expect(r.Publish(ctx)).To(Succeed())
	g.Expect(writes).To(BeZero(), "no stream, no report")

	checkout := topology.FlagSetKey("shop", "checkout")
	w.flagSet("shop", "checkout", "off")
	sub := h.join(checkout, "shop", "")
	h.round()
	sendAll(h, sub)
	g.Expect(r.Publish(ctx)).To(Succeed())
	g.Expect(writes).To(Equal(1))
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "flagplane-system", Name: "flagplane-sync-report-flagplane-abc"}, cm)).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue(status.SyncReportLabel, "true"))
	g.Expect(cm.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("Name", "flagplane-abc"), HaveField("UID", BeEquivalentTo("uid-1")))))
	rep, err := status.DecodeSyncReport(cm.Data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Entries).To(HaveLen(1))

	g.Expect(r.Publish(ctx)).To(Succeed())
	h.reportChanged.Store(true) // something happened, and the report is the same
	g.Expect(r.Publish(ctx)).To(Succeed())
	g.Expect(writes).To(Equal(1), "written only when it changed")

	h.leave(sub)
	g.Expect(r.Publish(ctx)).To(Succeed())
	err = c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no stream left: no report (%v)", err)
}

// reporterFixture is a sync server over a world of its own, and a fake API
// holding existing.
func reporterFixture(t *testing.T, existing ...client.Object) (*world, *Server, client.Client) {
	t.Helper()
	w := newWorld(t)
	srv, err := New(w.topo, Options{Authenticator: Chain{}})
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return w, srv, fake.NewClientBuilder().WithScheme(s).WithObjects(existing...).Build()
}

type countingApplies struct {
	client.Client
	n *int
}

func (c countingApplies) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	*c.n++
	return c.Client.Apply(ctx, obj, opts...)
}

// A report of more entries than a ConfigMap holds is split over shards:
// each written when it changes, the ones no longer needed deleted, and
// those an earlier run left (found through Reader) replaced or deleted.
func TestReporterShards(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	leftover := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "flagplane-system", Name: ReportShardName("flagplane-abc", i),
			Labels: map[string]string{status.SyncReportLabel: "true"}}, Data: map[string]string{status.SyncReportKey: `{"replica":"old"}`}}
	}
	other := leftover(0)
	other.Name = ReportName("flagplane-abcd") // another replica's: left alone
	w, srv, c := reporterFixture(t, leftover(0), leftover(3), other)
	h := srv.hub
	writes := 0
	r := &Reporter{Server: srv, Client: countingApplies{Client: c, n: &writes}, Reader: c, Namespace: "flagplane-system", Replica: "flagplane-abc", MaxEntries: 1}
	r.published = []map[string]string{{}}
	g.Expect(r.adoptLeftovers(ctx)).To(Succeed())

	checkout := topology.FlagSetKey("shop", "checkout")
	w.flagSet("shop", "checkout", "off")
	w.source("web", "src", "shop/checkout")
	w.grant("shop", "g", []string{"web"}, nil)
	inShop, inWeb := h.join(checkout, "shop", ""), h.join(checkout, "web", "")
	h.round()
	sendAll(h, inShop, inWeb)
	h.reportChanged.Store(true)
	g.Expect(r.Publish(ctx)).To(Succeed())
	names := func() []string {
		var list corev1.ConfigMapList
		g.Expect(c.List(ctx, &list, client.InNamespace("flagplane-system"))).To(Succeed())
		var out []string
		for _, cm := range list.Items {
			out = append(out, cm.Name)
		}
		return out
	}
	g.Expect(names()).To(ConsistOf(ReportShardName("flagplane-abc", 0), ReportShardName("flagplane-abc", 1), other.Name),
		"two entries, one per shard; the earlier run's fourth shard deleted")
	g.Expect(ReportShardName("flagplane-abc", 1)).To(Equal("flagplane-sync-report-flagplane-abc.part-1"))
	namespaces := map[string]bool{}
	for i := range 2 {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "flagplane-system", Name: ReportShardName("flagplane-abc", i)}, cm)).To(Succeed())
		rep, err := status.DecodeSyncReport(cm.Data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rep.Entries).To(HaveLen(1))
		namespaces[rep.Entries[0].Namespace] = true
	}
	g.Expect(namespaces).To(Equal(map[string]bool{"shop": true, "web": true}))
	g.Expect(writes).To(Equal(2))

	// One stream leaves: one shard is enough, the other is deleted.
	h.leave(inWeb)
	g.Expect(r.Publish(ctx)).To(Succeed())
	g.Expect(names()).To(ConsistOf(ReportShardName("flagplane-abc", 0), other.Name))
	g.Expect(writes).To(Equal(2), "the first shard did not change")

	r.remove()
	g.Expect(names()).To(ConsistOf(other.Name))
}

func TestShardNames(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("a", 260)
	for i := range MaxReportShards {
		name := ReportShardName(long, i)
		g.Expect(len(name)).To(BeNumerically("<=", 253))
		got, ok := shardOf(long, name)
		g.Expect(ok).To(BeTrue())
		g.Expect(got).To(Equal(i))
	}
	_, ok := shardOf("flagplane-abc", ReportName("flagplane-abcd"))
	g.Expect(ok).To(BeFalse())
}
