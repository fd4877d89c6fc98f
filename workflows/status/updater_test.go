package status

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
)

// staleReader serves the objects it was given, whatever the cluster holds
// since: a cache that has not seen the last writes yet.
type staleReader struct {
	client.Client
	objs map[client.ObjectKey]client.Object
}

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if old, ok := r.objs[key]; ok {
		return r.Client.Scheme().Convert(old.DeepCopyObject(), obj, nil)
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

// TestStatusIsNotDecidedOnACacheBehindItsOwnWrite: once the updater wrote a
// status, a cache that still holds the version before that write makes it
// ask to be run again (ErrCacheBehind) rather than compare with a status
// that is gone; once the cache holds the write, it decides as usual.
func TestStatusIsNotDecidedOnACacheBehindItsOwnWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	v, _ := workflowstest.World(t)
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1beta1.AddToScheme(s)
	cluster := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1beta1.FeatureFlagSource{}, &v1beta1.FeatureFlag{}).Build()
	src := &v1beta1.FeatureFlagSource{}
	key := topology.SourceKey("shop", "src")
	// The world of workflowstest.World as objects of the cluster.
	ff := &v1beta1.FeatureFlag{}
	ffv, _ := v.FlagSet(topology.FlagSetKey("shop", "flags"))
	ffv.DeepCopyInto(ff)
	ff.ResourceVersion = ""
	srcv, _ := v.Source(key)
	srcv.DeepCopyInto(src)
	src.ResourceVersion, src.UID = "", "src"
	g.Expect(cluster.Create(ctx, ff)).To(Succeed())
	g.Expect(cluster.Create(ctx, src)).To(Succeed())
	beforeWrite := src.DeepCopy()

	u := &Updater{Client: cluster}
	g.Expect(u.UpdateSource(ctx, v, key)).To(Succeed())
	written := &v1beta1.FeatureFlagSource{}
	g.Expect(cluster.Get(ctx, client.ObjectKeyFromObject(src), written)).To(Succeed())
	g.Expect(written.ResourceVersion).NotTo(Equal(beforeWrite.ResourceVersion), "a status was written")

	u.Client = staleReader{Client: cluster, objs: map[client.ObjectKey]client.Object{client.ObjectKeyFromObject(src): beforeWrite}}
	err := u.UpdateSource(ctx, v, key)
	g.Expect(errors.Is(err, ErrCacheBehind)).To(BeTrue(), "got %v", err)

	u.Client = cluster
	g.Expect(u.UpdateSource(ctx, v, key)).To(Succeed())
	u.Client = staleReader{Client: cluster, objs: map[client.ObjectKey]client.Object{client.ObjectKeyFromObject(src): beforeWrite}}
	before := &v1beta1.FeatureFlagSource{}
	g.Expect(cluster.Get(ctx, client.ObjectKeyFromObject(src), before)).To(Succeed())
	err = u.UpdateSource(ctx, v, key)
	// Once the cache held the write, an older version is somebody else's
	// change (an edit): the write is refused with a conflict, which is the
	// cache being behind again, not a failure to log; nothing is written.
	g.Expect(errors.Is(err, ErrCacheBehind)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("does not hold the last status write"), "it is a conflict, not our own write")
	after := &v1beta1.FeatureFlagSource{}
	g.Expect(cluster.Get(ctx, client.ObjectKeyFromObject(src), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the stale status was not written")
}

// awaiting is a Deliveries whose ConfigMap writes are on their way or not,
// and that remembers what was awaited.
type awaiting struct {
	onItsWay bool
	awaited  []string
}

func (a *awaiting) Await(flagSet topology.Key, namespace string) bool {
	a.awaited = append(a.awaited, namespace+"/"+topology.ConfigMapName(flagSet))
	return a.onItsWay
}

// TestFlagSetStatusWaitsForItsConfigMapWrites: an edit whose ConfigMap is
// being written is not reported until the write is in the cache (one
// status write carries the edit and its delivery), unless the write failed
// or the status is more than one edit behind; with nothing on its way the
// status is written at once.
func TestFlagSetStatusWaitsForItsConfigMapWrites(t *testing.T) {
	ctx := context.Background()
	key := topology.FlagSetKey("shop", "flags")
	cmName := topology.ConfigMapName(key)
	for _, tc := range []struct {
		name                string
		onItsWay            bool
		failed              bool
		generation, applied int64
		written             bool
	}{
		{name: "write on its way", onItsWay: true, generation: 2, applied: 1, written: false},
		{name: "first status of a new flag set, its ConfigMap being created", onItsWay: true, generation: 1, applied: 0, written: false},
		{name: "nothing on its way", onItsWay: false, generation: 2, applied: 1, written: true},
		{name: "the write failed", onItsWay: true, failed: true, generation: 2, applied: 1, written: true},
		{name: "two edits behind", onItsWay: true, generation: 3, applied: 1, written: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v, _ := workflowstest.World(t)
			cluster, ff := clusterWithFlagSet(t, v, key, tc.generation, tc.applied)
			before := ff.ResourceVersion

			failures := &workflows.WriteFailures{}
			if tc.failed {
				failures.Record(workflows.ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: cmName}, errors.New("forbidden"))
			}
			d := &awaiting{onItsWay: tc.onItsWay}
			u := &Updater{Client: cluster, Deliveries: d, Failures: failures}
			g.Expect(u.UpdateFlagSet(ctx, v, key)).To(Succeed())

			got := &v1beta1.FeatureFlag{}
			g.Expect(cluster.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
			g.Expect(got.ResourceVersion != before).To(Equal(tc.written), "status written")
			if tc.written {
				g.Expect(got.Status.ObservedGeneration).To(Equal(tc.generation))
				return
			}
			g.Expect(d.awaited).To(Equal([]string{"shop/" + cmName}), "the ConfigMap not created yet, awaited")
		})
	}
}

// clusterWithFlagSet is a cluster that holds the world's flag set key at
// generation, its status at applied.
func clusterWithFlagSet(t *testing.T, v *topology.View, key topology.Key, generation, applied int64) (client.Client, *v1beta1.FeatureFlag) {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1beta1.AddToScheme(s)
	cluster := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1beta1.FeatureFlag{}).Build()
	ff := &v1beta1.FeatureFlag{}
	ffv, _ := v.FlagSet(key)
	ffv.DeepCopyInto(ff)
	ff.ResourceVersion, ff.Generation = "", generation
	ff.Status.ObservedGeneration = applied
	if err := cluster.Create(context.Background(), ff); err != nil {
		t.Fatal(err)
	}
	return cluster, ff
}

// landing is a Deliveries whose ConfigMap write reaches the cache at the
// moment it is asked about: after the status was computed, before it is
// written. The write is then not on its way any more.
type landing struct {
	land func()
}

func (l *landing) Await(topology.Key, string) bool {
	if l.land != nil {
		l.land()
		l.land = nil
	}
	return false
}

// TestFlagSetStatusIsNotWrittenFromBeforeAWriteLanded: a ConfigMap write
// that ends between the computing of a flag set's status and the question
// whether it is on its way is in the cache by then; the status written
// says so (delivered 1/1), not what the cache held a moment before
// (0/1, followed by a second write once the ConfigMap's event came).
func TestFlagSetStatusIsNotWrittenFromBeforeAWriteLanded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := topology.FlagSetKey("shop", "flags")
	v, _ := workflowstest.World(t)
	cluster, ff := clusterWithFlagSet(t, v, key, 2, 1)

	cmKey, ok := v.ConfigMapByName("shop", topology.ConfigMapName(key))
	g.Expect(ok).To(BeTrue(), "the world's source needs a ConfigMap in shop")
	cm, err := configmaps.Desired(v, cmKey, workflows.Settings{})
	g.Expect(err).NotTo(HaveOccurred())
	d := &landing{land: func() { g.Expect(cluster.Create(ctx, cm)).To(Succeed()) }}
	u := &Updater{Client: cluster, Deliveries: d, Failures: &workflows.WriteFailures{}}
	g.Expect(u.UpdateFlagSet(ctx, v, key)).To(Succeed())
	g.Expect(d.land).To(BeNil(), "the ConfigMap was asked about")

	got := &v1beta1.FeatureFlag{}
	g.Expect(cluster.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
	g.Expect(got.Status.ObservedGeneration).To(Equal(int64(2)))
	g.Expect(got.Status.Delivered).To(Equal("1/1"), "the status says what the cache holds when it is written")
}

// A flag set whose pods do not all confirm its revision is looked at again
// when the first namespace's bound passes, so that Stalled is said then,
// and every confirmRecheck otherwise.
func TestRecheckAfter(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	since := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	for _, c := range []struct {
		name    string
		bound   time.Duration
		serving []v1beta1.NamespaceServing
		want    error
	}{
		{"every pod confirms", 20 * time.Second, []v1beta1.NamespaceServing{{Pods: 2, Confirmed: 2, Since: since(time.Second)}}, nil},
		{"no consumers", 20 * time.Second, nil, nil},
		{"the bound passes in 5 s", 20 * time.Second, []v1beta1.NamespaceServing{{Pods: 2, Confirmed: 1, Since: since(15 * time.Second)}},
			workflows.RequeueAfter(5*time.Second + overdueSlack)},
		{"the earliest bound of the namespaces not confirmed", 20 * time.Second, []v1beta1.NamespaceServing{
			{Namespace: "a", Pods: 1, Since: since(2 * time.Second)},
			{Namespace: "b", Pods: 1, Since: since(12 * time.Second)},
			{Namespace: "c", Pods: 1, Confirmed: 1, Since: since(19 * time.Second)},
		}, workflows.RequeueAfter(8*time.Second + overdueSlack)},
		{"a bound passed already: the recheck", 20 * time.Second, []v1beta1.NamespaceServing{{Pods: 1, Since: since(time.Minute)}},
			workflows.RequeueAfter(confirmRecheck)},
		{"no time known: the recheck", 20 * time.Second, []v1beta1.NamespaceServing{{Pods: 1}}, workflows.RequeueAfter(confirmRecheck)},
		{"a bound further than the recheck", time.Minute, []v1beta1.NamespaceServing{{Pods: 1, Since: since(0)}},
			workflows.RequeueAfter(confirmRecheck)},
	} {
		if got := recheckAfter(c.serving, now, c.bound); c.want == nil {
			g.Expect(got).To(BeNil(), c.name)
		} else {
			g.Expect(got).To(Equal(c.want), c.name)
		}
	}
	// What the status finds at that time: overdue.
	_, found, overdue := unconfirmed([]v1beta1.NamespaceServing{{Pods: 1, Since: since(15 * time.Second)}}, now.Add(5*time.Second+overdueSlack), 20*time.Second)
	g.Expect(found && overdue).To(BeTrue())
}
