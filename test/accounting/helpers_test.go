package accounting

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/metrics"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// counts are the manager's API requests so far.
func (m *manager) counts() metrics.APIRequestCounts { return m.Metrics.APIRequests().Snapshot() }

// settled waits until the manager has nothing left to do about what the API
// server holds: its caches hold every object at the API server's version,
// no key waits, is reconciled or is retried, and none was reconciled and no
// callback ran since the look before (settledQuiet earlier). Counts taken
// then are final for what happened before.
//
// A cache that lists an object at the API server's version has stored its
// event, but an informer stores an event before it hands it to the
// handlers, each on a goroutine of its own: a handler may still be about
// to put a key on a queue. Without the quiet look, a reconciliation of
// that key could be counted after the counts were taken: seen once, as one
// reconciliation too many during the resyncs, under the race detector on
// 2 busy cores.
func (m *manager) settled(ctx context.Context) {
	GinkgoHelper()
	last := [2]float64{-1, -1}
	Eventually(ctx, func(g Gomega) {
		g.Expect(m.Controller.Idle()).To(BeTrue(), "workflows busy")
		for _, lists := range []struct {
			api, cached client.ObjectList
			opts        []client.ListOption
		}{
			{&v1beta1.FeatureFlagList{}, &v1beta1.FeatureFlagList{}, nil},
			{&v1beta1.FeatureFlagSourceList{}, &v1beta1.FeatureFlagSourceList{}, nil},
			{&appsv1.DeploymentList{}, &appsv1.DeploymentList{}, nil},
			{&corev1.ConfigMapList{}, &corev1.ConfigMapList{}, []client.ListOption{client.MatchingLabels(workflows.ManagedLabels())}},
			// A pod that comes asks for its flag sets' status (what their
			// consumers serve), with no event of the graph's.
			{&corev1.PodList{}, &corev1.PodList{}, nil},
		} {
			g.Expect(k8s.List(ctx, lists.api, lists.opts...)).To(Succeed())
			g.Expect(m.GetCache().List(ctx, lists.cached, lists.opts...)).To(Succeed())
			g.Expect(versions(lists.cached)).To(Equal(versions(lists.api)), "the manager's cache is behind")
		}
		g.Expect(m.Controller.Idle()).To(BeTrue(), "workflows busy")
		now := [2]float64{m.metricTotal("flagplane_reconcile_duration_seconds"), m.metricTotal("flagplane_events_total")}
		quiet := now == last
		last = now
		g.Expect(quiet).To(BeTrue(), "reconciliations and callbacks since the look before")
	}).WithPolling(settledQuiet).Should(Succeed())
}

// settledQuiet is how long the manager is to stay idle for settled.
const settledQuiet = 500 * time.Millisecond

// versions maps namespace/name to resourceVersion.
func versions(list client.ObjectList) map[string]string {
	out := map[string]string{}
	Expect(meta.EachListItem(list, func(o runtime.Object) error {
		obj := o.(client.Object)
		out[obj.GetNamespace()+"/"+obj.GetName()] = obj.GetResourceVersion()
		return nil
	})).To(Succeed())
	return out
}

// metricTotal sums a counter's values, or a histogram's sample counts, over
// all labels, from the manager's registry.
func (m *manager) metricTotal(name string) float64 {
	GinkgoHelper()
	families, err := m.registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			switch {
			case s.Counter != nil:
				total += s.Counter.GetValue()
			case s.Histogram != nil:
				total += float64(s.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

// resyncProbe counts the resyncs the manager's informers deliver: updates
// whose object is the one the informer had (same resourceVersion).
type resyncProbe struct {
	kinds map[string]*atomic.Int64
}

func (m *manager) probeResyncs(ctx context.Context) *resyncProbe {
	GinkgoHelper()
	p := &resyncProbe{kinds: map[string]*atomic.Int64{}}
	for _, obj := range []client.Object{&v1beta1.FeatureFlag{}, &v1beta1.FeatureFlagSource{}, &appsv1.Deployment{}, &corev1.ConfigMap{}} {
		inf, err := m.GetCache().GetInformer(ctx, obj)
		Expect(err).NotTo(HaveOccurred())
		n := &atomic.Int64{}
		p.kinds[fmt.Sprintf("%T", obj)] = n
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, new any) {
			if old.(client.Object).GetResourceVersion() == new.(client.Object).GetResourceVersion() {
				n.Add(1)
			}
		}})
		Expect(err).NotTo(HaveOccurred())
	}
	return p
}

func (p *resyncProbe) snapshot() map[string]int64 {
	out := map[string]int64{}
	for k, n := range p.kinds {
		out[k] = n.Load()
	}
	return out
}

// flagSetUsedIn creates a FeatureFlag in a namespace of its own and, in k
// namespaces (its own the first), a Deployment and a FeatureFlagSource that
// reads it for that Deployment, with the ReferenceGrants that permit it. It
// returns the flag set and its k generated ConfigMaps, once they exist.
func flagSetUsedIn(ctx context.Context, k int) (*v1beta1.FeatureFlag, []client.ObjectKey) {
	GinkgoHelper()
	home := newNamespace(ctx)
	ff := fixtures.FlagSet(home, "checkout", "off")
	Expect(k8s.Create(ctx, ff)).To(Succeed())
	var cms []client.ObjectKey
	for i := range k {
		ns, ref := home, "checkout"
		if i > 0 {
			ns, ref = newNamespace(ctx), home+"/checkout"
			Expect(k8s.Create(ctx, fixtures.ReferenceGrant(home, "from-"+ns, ns, "checkout"))).To(Succeed())
		}
		Expect(k8s.Create(ctx, fixtures.Deployment(ns, "web", nil, nil))).To(Succeed())
		Expect(k8s.Create(ctx, fixtures.Source(ns, "flags", []v1beta1.Source{fixtures.FileRef(ref)},
			fixtures.Targeting("Deployment", "web")))).To(Succeed())
		cms = append(cms, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(topology.FlagSetKey(home, "checkout"))})
	}
	for _, cm := range cms {
		Eventually(ctx, contentOf(ctx, cm, ff)).ShouldNot(BeEmpty(), "ConfigMap %s", cm)
		// kube-controller-manager creates the Deployment's pod when it
		// gets to it; the pod's event would come in the middle of a count.
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(cm.Namespace))).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
		}).Should(Succeed(), "the pod of the Deployment in %s", cm.Namespace)
	}
	return ff, cms
}

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, "acct")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// contentOf reads the flagd JSON of ff in a generated ConfigMap ("" when missing).
func contentOf(ctx context.Context, cm client.ObjectKey, ff *v1beta1.FeatureFlag) func() string {
	return func() string {
		got := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, cm, got); err != nil {
			Expect(client.IgnoreNotFound(err)).To(Succeed())
			return ""
		}
		return got.Data[topology.ConfigMapDataKey(topology.FlagSetKey(ff.Namespace, ff.Name))]
	}
}

// rendered is the content a ConfigMap of ff must hold.
func rendered(ff *v1beta1.FeatureFlag) string {
	GinkgoHelper()
	s, _, err := flagsets.Serve(ff)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// setDefaultVariant edits the flag set's one flag.
func setDefaultVariant(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	GinkgoHelper()
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
	fl := ff.Spec.FlagSpec.Flags[fixtures.FlagKey]
	fl.DefaultVariant = variant
	ff.Spec.FlagSpec.Flags[fixtures.FlagKey] = fl
	Expect(k8s.Update(ctx, ff)).To(Succeed())
}

// statusObserved: the FeatureFlag's status is about its current generation.
func statusObserved(ctx context.Context, ff *v1beta1.FeatureFlag) func() int64 {
	return func() int64 {
		got := &v1beta1.FeatureFlag{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
		return got.Status.ObservedGeneration - got.Generation
	}
}

func configMapWrites(r metrics.APIRequest) bool { return r.Resource == "configmaps" && r.Write() }

// statusWrites matches the writes of the status of a resource (as counted:
// "featureflags.core.openfeature.dev").
func statusWrites(resource string) func(metrics.APIRequest) bool {
	return func(r metrics.APIRequest) bool { return r.Resource == resource+"/status" && r.Write() }
}

// delivery is "<revision> <delivered> <Ready status>" of a FeatureFlag's status.
func delivery(ctx context.Context, ff *v1beta1.FeatureFlag) string {
	GinkgoHelper()
	got := &v1beta1.FeatureFlag{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
	ready := "missing"
	if c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionReady); c != nil {
		ready = string(c.Status)
	}
	return fmt.Sprintf("%s %s %s", got.Status.Revision, got.Status.Delivered, ready)
}

// revision is the revision of ff's current content.
func revision(ff *v1beta1.FeatureFlag) string {
	GinkgoHelper()
	_, r, err := flagsets.Serve(ff)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// report puts the counts into the spec's report and its output.
func report(name string, counts metrics.APIRequestCounts) {
	AddReportEntry(name, "\n"+counts.String())
	fmt.Fprintf(GinkgoWriter, "%s:\n%s", name, counts)
}

// cachedObjects counts the objects of a kind (as the probe names it) in the manager's cache.
func cachedObjects(ctx context.Context, m *manager, kind string) int64 {
	GinkgoHelper()
	var list client.ObjectList
	var opts []client.ListOption
	switch kind {
	case "*v1beta1.FeatureFlag":
		list = &v1beta1.FeatureFlagList{}
	case "*v1beta1.FeatureFlagSource":
		list = &v1beta1.FeatureFlagSourceList{}
	case "*v1.Deployment":
		list = &appsv1.DeploymentList{}
	case "*v1.ConfigMap":
		list = &corev1.ConfigMapList{}
		opts = append(opts, client.MatchingLabels(workflows.ManagedLabels()))
	default:
		Fail("unknown kind " + kind)
	}
	Expect(m.GetCache().List(ctx, list, opts...)).To(Succeed())
	return int64(meta.LenList(list))
}

// programmed is "Status/Reason" of a source's Programmed condition.
func programmed(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	src := &v1beta1.FeatureFlagSource{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, src)).To(Succeed())
	c := meta.FindStatusCondition(src.Status.Conditions, v1beta1.ConditionProgrammed)
	if c == nil {
		return "missing"
	}
	return string(c.Status) + "/" + c.Reason
}
