package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// fakeHealer records the workloads it heals; a pod needs a look when it
// is annotated so; healing panicOn panics.
type fakeHealer struct {
	mu      sync.Mutex
	healed  []topology.Key
	changed []topology.Key
	panicOn topology.Key
}

func (f *fakeHealer) Heal(_ context.Context, w topology.Key) (time.Duration, error) {
	if w == f.panicOn {
		panic("healing " + w.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.healed = append(f.healed, w)
	return 0, nil
}

func (f *fakeHealer) NeedsLook(pod *corev1.Pod) bool {
	return pod.Annotations["test/needs-look"] == "yes"
}

func (f *fakeHealer) WorkloadsChanged(workloads []topology.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changed = append(f.changed, workloads...)
}

func (f *fakeHealer) healedNow() []topology.Key {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]topology.Key(nil), f.healed...)
}

// healerController is a routing controller with a healer whose pods and
// owners are c's objects; the healer runs once start is called.
func healerController(t *testing.T, h *fakeHealer, resync time.Duration, workers int, objs ...client.Object) (*Controller, client.Client, func()) {
	t.Helper()
	s, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	byController := func(obj client.Object) []string {
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			return []string{ref.Kind + "/" + ref.Name}
		}
		return nil
	}
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, restarts.ControllerIndex, byController).
		WithIndex(&appsv1.ReplicaSet{}, restarts.ControllerIndex, byController).Build()
	c := routingController()
	c.owners = restarts.Owners{Reader: cl}
	c.AddHealer(h, resync, workers)
	c.heal.pods = cl
	start := func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.runHealer(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return c, cl, start
}

func webReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "rs",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "web", Controller: ptr.To(true)}}}}
}

func webPod(name string, needsLook bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("pod-" + name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: ptr.To(true)}}}}
	if needsLook {
		p.Annotations = map[string]string{"test/needs-look": "yes"}
	}
	return p
}

// healerMetric is the value of a counter of controller-runtime's registry
// with controller=HealerQueue and the given further labels.
func healerMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"controller": HealerQueue}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	total := 0.0
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
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// TestHealerQueue: the healer's queue is fed by pod events, the workloads
// of Deltas and a resync of every pod, serves nothing before the start-up
// pass is over, and a heal that panics fails alone.
func TestHealerQueue(t *testing.T) {
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	db := topology.WorkloadKey(topology.KindStatefulSet, "shop", "db")

	t.Run("at start every pod is looked at; then a pod event heals the pod's workload", func(t *testing.T) {
		g := NewWithT(t)
		h := &fakeHealer{}
		c, cl, start := healerController(t, h, time.Hour, 2, webReplicaSet(), webPod("web-1-a", false))
		start()
		g.Consistently(h.healedNow, "200ms").Should(BeEmpty(), "no pod needs a look")

		orphan := webPod("web-1-b", true)
		g.Expect(cl.Create(context.Background(), orphan)).To(Succeed())
		c.podHandler().onAdd(orphan)
		g.Eventually(h.healedNow).Should(ConsistOf(web))
	})

	t.Run("at start and every resync the pods are looked at again", func(t *testing.T) {
		g := NewWithT(t)
		h := &fakeHealer{}
		_, cl, start := healerController(t, h, 50*time.Millisecond, 2, webReplicaSet(), webPod("web-1-a", true))
		start()
		g.Eventually(h.healedNow).Should(ContainElement(web), "the pod there at start")
		before := len(h.healedNow())
		// No event: the resync finds it.
		g.Expect(cl.Create(context.Background(), webPod("web-1-b", true))).To(Succeed())
		g.Eventually(func() int { return len(h.healedNow()) }).Should(BeNumerically(">", before))
	})

	t.Run("nothing is healed before the healer runs; what came meanwhile is then", func(t *testing.T) {
		g := NewWithT(t)
		h := &fakeHealer{}
		c, _, start := healerController(t, h, time.Hour, 2, webReplicaSet())
		var d topology.Delta
		d.Add(web)
		c.dispatch(d)
		g.Expect(h.changed).To(ConsistOf(web), "the healer hears the Delta's workloads")
		g.Consistently(h.healedNow, "200ms").Should(BeEmpty())
		start()
		g.Eventually(h.healedNow).Should(ConsistOf(web))
	})

	t.Run("a heal that panics fails alone: the next workload is healed, and it counts as an error", func(t *testing.T) {
		g := NewWithT(t)
		h := &fakeHealer{panicOn: db}
		// One worker: a panic that killed it would leave nobody to heal web.
		c, _, start := healerController(t, h, time.Hour, 1, webReplicaSet())
		failed := healerMetric(t, "controller_runtime_reconcile_total", "result", "error")
		success := healerMetric(t, "controller_runtime_reconcile_total", "result", "success")
		start()
		var d topology.Delta
		d.Add(db)
		c.dispatch(d) // db first, and its heal panics
		d = topology.Delta{}
		d.Add(web)
		c.dispatch(d)
		g.Eventually(h.healedNow).Should(ContainElement(web))
		g.Eventually(func() float64 {
			return healerMetric(t, "controller_runtime_reconcile_total", "result", "error") - failed
		}).Should(BeNumerically(">=", 1), "a panic is a failure, retried with backoff")
		g.Expect(healerMetric(t, "controller_runtime_reconcile_total", "result", "success") - success).To(BeNumerically(">=", 1))
	})
}
