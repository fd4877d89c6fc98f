package status

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// syncOnly observes no generated object, and the sync reports it holds.
type syncOnly struct{ reports *SyncReports }

func (syncOnly) ConfigMapData(string, string) (map[string]string, bool) { return nil, false }
func (syncOnly) Role(string, string) *rbacv1.Role                       { return nil }
func (syncOnly) RoleBinding(string, string) *rbacv1.RoleBinding         { return nil }
func (syncOnly) WriteFailure(string, string, string) workflows.Failure  { return workflows.Failure{} }
func (o syncOnly) SyncSubscribers(k topology.Key) []SyncSubscribers     { return o.reports.Of(k) }

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func entry(ns string, held ...HeldRevision) SyncEntry {
	return SyncEntry{FlagSetNamespace: "shop", FlagSet: "checkout", Namespace: ns, Held: held}
}

// Two replicas' reports of one namespace add up by revision; the Since of a
// revision is when the last stream that holds it was sent it.
func TestFoldSyncEntries(t *testing.T) {
	g := NewWithT(t)
	got := FoldSyncEntries([]SyncEntry{
		entry("web", HeldRevision{Revision: "a", Streams: 2, Since: t0}),
		entry("api", HeldRevision{Revision: "a", Streams: 1, Since: t0}),
		entry("web", HeldRevision{Revision: "a", Streams: 1, Since: t0.Add(time.Minute)}, HeldRevision{Streams: 1}),
		entry("empty", HeldRevision{Revision: "a", Streams: 0, Since: t0}),
	})
	g.Expect(got).To(Equal([]SyncSubscribers{
		{Namespace: "api", Held: []HeldRevision{{Revision: "a", Streams: 1, Since: t0}}},
		{Namespace: "web", Held: []HeldRevision{{Streams: 1}, {Revision: "a", Streams: 3, Since: t0.Add(time.Minute)}}},
	}))
	g.Expect(got[1].Streams()).To(BeEquivalentTo(4))
}

// The store tells which flag sets a report changes, folds every replica's
// report, and forgets a replica whose report went away.
func TestSyncReportsAcrossReplicas(t *testing.T) {
	g := NewWithT(t)
	checkout, pricing := topology.FlagSetKey("shop", "checkout"), topology.FlagSetKey("shop", "pricing")
	var s SyncReports
	g.Expect(s.Set("replica-a", &SyncReport{Entries: []SyncEntry{entry("web", HeldRevision{Revision: "a", Streams: 1, Since: t0})}})).
		To(Equal([]topology.Key{checkout}))
	changed := s.Set("replica-b", &SyncReport{Entries: []SyncEntry{
		entry("web", HeldRevision{Revision: "a", Streams: 2, Since: t0}),
		{FlagSetNamespace: "shop", FlagSet: "pricing", Namespace: "web", Held: []HeldRevision{{Revision: "p", Streams: 1, Since: t0}}},
	}})
	g.Expect(changed).To(Equal([]topology.Key{checkout, pricing}))
	g.Expect(s.Of(checkout)).To(Equal([]SyncSubscribers{{Namespace: "web", Held: []HeldRevision{{Revision: "a", Streams: 3, Since: t0}}}}))

	// A report rewritten for one flag set's streams recomputes that one only.
	g.Expect(s.Set("replica-b", &SyncReport{Entries: []SyncEntry{
		entry("web", HeldRevision{Revision: "a", Streams: 2, Since: t0}),
		{FlagSetNamespace: "shop", FlagSet: "pricing", Namespace: "web", Held: []HeldRevision{{Revision: "p2", Streams: 1, Since: t0.Add(time.Second)}}},
	}})).To(Equal([]topology.Key{pricing}))
	g.Expect(s.Set("replica-b", &SyncReport{Entries: []SyncEntry{
		entry("web", HeldRevision{Revision: "a", Streams: 2, Since: t0}),
		{FlagSetNamespace: "shop", FlagSet: "pricing", Namespace: "web", Held: []HeldRevision{{Revision: "p2", Streams: 1, Since: t0.Add(time.Second)}}},
	}})).To(BeEmpty(), "the same report again changes nothing")

	g.Expect(s.Set("replica-b", nil)).To(Equal([]topology.Key{checkout, pricing}), "its flag sets are recomputed when a report goes away")
	g.Expect(s.Of(checkout)).To(Equal([]SyncSubscribers{{Namespace: "web", Held: []HeldRevision{{Revision: "a", Streams: 1, Since: t0}}}}))
	g.Expect(s.Of(pricing)).To(BeEmpty())
	var none *SyncReports
	g.Expect(none.Of(checkout)).To(BeEmpty())
}

func TestSyncReportCodec(t *testing.T) {
	g := NewWithT(t)
	r := &SyncReport{Replica: "flagplane-0", Entries: []SyncEntry{entry("web", HeldRevision{Revision: "a", Streams: 1, Since: t0}), entry("api")}}
	r.Truncate(1)
	g.Expect(r.Truncated).To(Equal(1))
	data, err := EncodeSyncReport(r)
	g.Expect(err).NotTo(HaveOccurred())
	back, err := DecodeSyncReport(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(r))

	lie, _ := json.Marshal(&SyncReport{Entries: []SyncEntry{entry("web", HeldRevision{Revision: "a", Streams: -5})}})
	_, err = DecodeSyncReport(map[string]string{SyncReportKey: string(lie)})
	g.Expect(err).To(HaveOccurred())
	_, err = DecodeSyncReport(map[string]string{})
	g.Expect(err).To(HaveOccurred())
}

// The sync subscribers of each namespace are a consumer of the flag set: up
// to date when every stream, on every replica, was sent its revision; else
// showing the streams furthest behind. Since stays while the revision held
// does.
func TestSyncSubscribersInStatus(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", Generation: 1}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"f": {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off"},
	}
	if _, err := topo.UpsertFlagSet(ff); err != nil {
		t.Fatal(err)
	}
	content, err := flagsets.Render(ff)
	g.Expect(err).NotTo(HaveOccurred())
	rev := flagsets.Revision(content)
	reports := &SyncReports{}
	obs := syncOnly{reports}
	const name = "core.openfeature.dev/shop/checkout"

	reports.Set("replica-a", &SyncReport{Entries: []SyncEntry{entry("web", HeldRevision{Revision: rev, Streams: 2, Since: t0})}})
	reports.Set("replica-b", &SyncReport{Entries: []SyncEntry{entry("web", HeldRevision{Revision: rev, Streams: 1, Since: t0.Add(time.Second)})}})
	st := DesiredFlagSet(topo.Snapshot(), ff, obs)
	g.Expect(st.Revision).To(Equal(rev))
	g.Expect(st.Delivered).To(Equal("1/1"))
	g.Expect(st.Consumers).To(Equal([]v1beta1.ConsumerRevision{{Kind: KindSyncSubscribers, Namespace: "web", Name: name,
		Revision: rev, Since: &metav1.Time{Time: t0.Add(time.Second)}, Streams: 3, Current: 3}}))
	g.Expect(st.Unobserved).To(BeNil())

	// A stream behind on one replica, another not sent anything yet in another namespace.
	reports.Set("replica-b", &SyncReport{Entries: []SyncEntry{
		entry("web", HeldRevision{Revision: "0ld", Streams: 1, Since: t0.Add(-time.Hour)}),
		entry("api", HeldRevision{Streams: 1}),
	}})
	ff.Status = st
	st = DesiredFlagSet(topo.Snapshot(), ff, obs)
	g.Expect(st.Delivered).To(Equal("0/2"))
	g.Expect(st.Consumers).To(Equal([]v1beta1.ConsumerRevision{
		{Kind: KindSyncSubscribers, Namespace: "api", Name: name, Streams: 1},
		{Kind: KindSyncSubscribers, Namespace: "web", Name: name, Revision: "0ld", Since: &metav1.Time{Time: t0.Add(-time.Hour)}, Streams: 3, Current: 2},
	}))

	// The replica's report goes away, its streams with it; Since is kept while the revision held stays.
	reports.Set("replica-b", nil)
	before := metav1.NewTime(t0.Add(-time.Minute))
	ff.Status.Consumers = []v1beta1.ConsumerRevision{{Kind: KindSyncSubscribers, Namespace: "web", Name: name, Revision: rev, Since: &before}}
	st = DesiredFlagSet(topo.Snapshot(), ff, obs)
	g.Expect(st.Delivered).To(Equal("1/1"))
	g.Expect(st.Consumers).To(Equal([]v1beta1.ConsumerRevision{{Kind: KindSyncSubscribers, Namespace: "web", Name: name,
		Revision: rev, Since: &before, Streams: 2, Current: 2}}))
}

// Unobserved counts each workload and Flagd that reads the flag set with
// the kubernetes provider once, however many of its sources deliver it so;
// a source with another provider adds nothing.
func TestUnobserved(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}}
	source := func(name, provider string, targets ...string) {
		t.Helper()
		src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
		src.Spec.Sources = []v1beta1.Source{{Source: "checkout", Provider: v1beta1.SyncProviderType(provider)}}
		for _, w := range targets {
			src.Spec.TargetRefs = append(src.Spec.TargetRefs, v1beta1.TargetRef{Group: "apps", Kind: "Deployment", Name: w})
		}
		if _, err := topo.UpsertSource(src); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := topo.UpsertFlagSet(ff); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"web", "api", "batch"} {
		if _, err := topo.UpsertWorkload(topology.Workload{Kind: topology.KindDeployment, Namespace: "shop", Name: w}); err != nil {
			t.Fatal(err)
		}
	}
	key := topology.FlagSetKey("shop", "checkout")
	g.Expect(unobservedOf(topo.Snapshot(), key)).To(BeNil())

	source("files", "file", "batch")
	g.Expect(unobservedOf(topo.Snapshot(), key)).To(BeNil(), "the file provider is observed")

	source("a", "kubernetes", "web")
	g.Expect(unobservedOf(topo.Snapshot(), key)).To(HaveField("Workloads", int32(1)))

	source("b", "kubernetes", "web", "api")
	u := unobservedOf(topo.Snapshot(), key)
	g.Expect(u.Workloads).To(Equal(int32(2)), "web is read once, though two sources deliver it")
	g.Expect(u.Flagds).To(BeZero())
	g.Expect(u.Reason).To(ContainSubstring("kubernetes provider"))
}

// Unobserved counts the workloads whose in-process SDKs read the flag set:
// those an InProcessConfiguration whose selector names it applies to, in a
// namespace entitled to it. A selector of another namespace, or one that
// names no flag set, counts nothing; nothing in-process is ever confirmed.
func TestUnobservedInProcess(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	must := func(_ topology.Delta, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(topo.UpsertFlagSet(&v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}}))
	ipc := func(ns, name, selector string) {
		t.Helper()
		must(topo.UpsertInProcessConfig(&v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1beta1.InProcessConfigurationSpec{Selector: selector}}))
	}
	workload := func(ns, name, ipc string) {
		t.Helper()
		must(topo.UpsertWorkload(topology.Workload{Kind: topology.KindDeployment, Namespace: ns, Name: name,
			PodAnnotations: map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: ipc}}))
	}
	key := topology.FlagSetKey("shop", "checkout")

	ipc("shop", "sdk", "core.openfeature.dev/shop/checkout")
	ipc("shop", "all", "")
	ipc("other", "sdk", "core.openfeature.dev/shop/checkout")
	workload("shop", "web", "sdk")
	workload("shop", "api", "sdk")
	workload("shop", "batch", "all")
	workload("other", "thief", "sdk")

	u := unobservedOf(topo.Snapshot(), key)
	g.Expect(u).NotTo(BeNil())
	g.Expect(u.InProcess).To(Equal(int32(2)), "web and api; batch's selector names no flag set, other may not read it")
	g.Expect(u.Workloads).To(BeZero())
	g.Expect(u.Reason).To(ContainSubstring("in-process"))
	g.Expect(u.Reason).NotTo(ContainSubstring("kubernetes provider"))

	// Edits of the selector and of the workloads move the count, and the
	// Delta names the flag set whenever it does.
	d, err := topo.UpsertInProcessConfig(&v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sdk"},
		Spec: v1beta1.InProcessConfigurationSpec{Selector: "core.openfeature.dev/shop/other"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Has(key)).To(BeTrue())
	g.Expect(unobservedOf(topo.Snapshot(), key)).To(BeNil())
}

// A shard's encoding stays within MaxSyncReportBytes whatever its names:
// 2000 entries of the longest names Kubernetes allows, with three
// revisions each, pass the 1 MiB the API server allows a ConfigMap when
// split by count alone.
func TestSyncReportShardsFitAConfigMap(t *testing.T) {
	g := NewWithT(t)
	longest := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	r := &SyncReport{Replica: "flagplane-abc"}
	for i := range MaxSyncReportEntries {
		e := SyncEntry{FlagSetNamespace: longest('n', 63), FlagSet: fmt.Sprintf("%s%05d", longest('f', 248), i), Namespace: longest('s', 63)}
		for rev := range 3 {
			e.Held = append(e.Held, HeldRevision{Revision: fmt.Sprintf("%064d", rev), Streams: 100000, Since: time.Unix(1_800_000_000, 0).UTC()})
		}
		r.Entries = append(r.Entries, e)
	}
	byCount, err := EncodeSyncReport(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(byCount[SyncReportKey])).To(BeNumerically(">", 1<<20), "the case that broke: one shard by count is over the limit")

	shards := r.Shards(MaxSyncReportEntries, MaxSyncReportBytes, 50)
	g.Expect(len(shards)).To(BeNumerically(">", 1))
	total := 0
	for _, s := range shards {
		data, err := EncodeSyncReport(s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(data[SyncReportKey])).To(BeNumerically("<=", MaxSyncReportBytes))
		_, err = DecodeSyncReport(data)
		g.Expect(err).NotTo(HaveOccurred())
		total += len(s.Entries)
		g.Expect(s.Truncated).To(BeZero())
	}
	g.Expect(total).To(Equal(MaxSyncReportEntries), "nothing left out, entries in order")
	g.Expect(shards[0].Entries[0].FlagSet).To(HaveSuffix("00000"))

	// Past the last shard, the rest is counted as left out.
	few := r.Shards(MaxSyncReportEntries, MaxSyncReportBytes, 1)
	g.Expect(few).To(HaveLen(1))
	g.Expect(len(few[0].Entries) + few[0].Truncated).To(Equal(MaxSyncReportEntries))
	g.Expect(few[0].Truncated).To(BeNumerically(">", 0))
	g.Expect((&SyncReport{Replica: "x"}).Shards(10, MaxSyncReportBytes, 50)).To(BeEmpty())
}

// unobservedOf is what the status of flag set key in v counts unobserved.
func unobservedOf(v *topology.View, key topology.Key) *v1beta1.UnobservedConsumers {
	ff, _ := v.FlagSet(key)
	return unobserved(v.FlagSetFacts(ff).Unobserved)
}
