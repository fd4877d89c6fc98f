package webhooks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/flagplane/flagplane/topology"
)

// podInformer is the pod informer of healerCache: a fake one whose events
// the test sends, safe to use while the controller registers its handler.
type podInformer struct {
	*controllertest.FakeInformer
	mu         sync.Mutex
	registered bool
}

func (i *podInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.registered = true
	return i.FakeInformer.AddEventHandlerWithOptions(h, o)
}

func (i *podInformer) hasHandler() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.registered
}

func (i *podInformer) Add(obj metav1.Object) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.FakeInformer.Add(obj)
}

// healerCache is a manager's cache for the healer: its pod informer is
// podInformer, its reads are the fake client's.
type healerCache struct {
	*informertest.FakeInformers
	reader client.Reader
	pods   *podInformer
}

func (c *healerCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if _, ok := obj.(*corev1.Pod); ok {
		return c.pods, nil
	}
	return c.FakeInformers.GetInformer(ctx, obj, opts...)
}

func (c *healerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

func (c *healerCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// panickingReader panics on reading a StatefulSet: a heal of one panics.
type panickingReader struct{ client.Reader }

func (r panickingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*appsv1.StatefulSet); ok {
		panic("reading " + key.String())
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// builtGraph is a Graph whose GraphBuilt the test sets.
type builtGraph struct {
	Graph
	built atomic.Bool
}

func (g *builtGraph) GraphBuilt() bool { return g.built.Load() }

// runHealer runs h's controller until the test ends, with its pod informer
// and a cache that reads c. It returns the informer once the controller
// listens to it.
func runHealer(t *testing.T, h *Healer, c client.Client) *podInformer {
	t.Helper()
	pods := &podInformer{FakeInformer: controllertest.NewFakeInformer(controllertest.Synced)}
	h.Cache = &healerCache{FakeInformers: &informertest.FakeInformers{}, reader: c, pods: pods}
	ctrl, err := h.newController(h.controllerOptions(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctrl.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	NewWithT(t).Eventually(pods.hasHandler).Should(BeTrue())
	return pods
}

// healerMetric is the value of a counter or gauge of controller-runtime's
// registry with controller="healer" and the given further labels.
func healerMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"controller": HealerName}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue metric
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestHealerController(t *testing.T) {
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	db := topology.WorkloadKey(topology.KindStatefulSet, "shop", "db")
	created := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)

	t.Run("a pod event heals the pod's workload", func(t *testing.T) {
		g := NewWithT(t)
		orphan := pod("web-1-b", "web-1", created, nil)
		h, c, rec, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), orphan)
		h.Resync = time.Hour
		pods := runHealer(t, h, c)
		g.Consistently(func() string { return restartedAtOf(t, c) }, "200ms").Should(BeEmpty(), "no event, no resync yet")

		pods.Add(orphan)
		g.Eventually(func() string { return restartedAtOf(t, c) }).Should(Equal("2026-03-01T12:00:00Z"))
		g.Expect(<-rec.Events).To(ContainSubstring("Warning InjectionMissing"))
	})

	t.Run("every Resync the pods are looked at again", func(t *testing.T) {
		g := NewWithT(t)
		h, c, _, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-b", "web-1", created, nil))
		h.Resync = 50 * time.Millisecond
		runHealer(t, h, c) // no pod event: the resync finds the pod
		g.Eventually(func() string { return restartedAtOf(t, c) }).Should(Equal("2026-03-01T12:00:00Z"))
	})

	t.Run("nothing is healed before the graph is built; what came meanwhile is then", func(t *testing.T) {
		g := NewWithT(t)
		orphan := pod("web-1-b", "web-1", created, nil)
		h, c, _, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), orphan)
		h.Resync = time.Hour
		graph := &builtGraph{Graph: h.Graph}
		h.Graph = graph
		pods := runHealer(t, h, c)
		pods.Add(orphan)
		g.Consistently(func() string { return restartedAtOf(t, c) }, "300ms").Should(BeEmpty())
		graph.built.Store(true)
		g.Eventually(func() string { return restartedAtOf(t, c) }).Should(Equal("2026-03-01T12:00:00Z"))
	})

	t.Run("a heal that panics fails alone: the next workload is healed, and the metrics count both", func(t *testing.T) {
		g := NewWithT(t)
		h, c, _, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-b", "web-1", created, nil))
		h.Reader = panickingReader{c}
		h.Resync = time.Hour
		h.Workers = 1 // a panic that killed the worker would leave nobody to heal web
		success := healerMetric(t, "controller_runtime_reconcile_total", "result", "success")
		failed := healerMetric(t, "controller_runtime_reconcile_total", "result", "error")
		panics := healerMetric(t, "controller_runtime_reconcile_panics_total")
		adds := healerMetric(t, "workqueue_adds_total", "name", HealerName)
		runHealer(t, h, c)

		g.Eventually(func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.queue != nil
		}).Should(BeTrue(), "the healer hears Deltas once it runs")
		h.WorkloadsChanged([]topology.Key{db, web}) // db first, and its heal panics
		g.Eventually(func() string { return restartedAtOf(t, c) }).Should(Equal("2026-03-01T12:00:00Z"))

		g.Eventually(func() float64 { return healerMetric(t, "controller_runtime_reconcile_panics_total") - panics }).Should(BeNumerically(">=", 1))
		g.Eventually(func() float64 {
			return healerMetric(t, "controller_runtime_reconcile_total", "result", "error") - failed
		}).Should(BeNumerically(">=", 1), "a panic is a failure, retried with backoff")
		g.Eventually(func() float64 {
			return healerMetric(t, "controller_runtime_reconcile_total", "result", "success") - success
		}).Should(BeNumerically(">=", 1))
		g.Expect(healerMetric(t, "workqueue_adds_total", "name", HealerName) - adds).To(BeNumerically(">=", 2))
		g.Expect(healerMetric(t, "controller_runtime_max_concurrent_reconciles")).To(Equal(1.0))
	})
}
