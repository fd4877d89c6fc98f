package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/status"
)

// BenchmarkFlagSetEditStatus is the status work of one FeatureFlag edit
// against the number of workloads its source targets, 10 and 10,000 in
// the same op, reported as their ratio: the edit's Delta dispatched and the
// status queue drained (the flag set's status waits for its ConfigMap),
// then the ConfigMap's informer event, as it comes once the ConfigMap
// workflow has written it, and the status queue drained again (the flag
// set's one status write). The cache and the API server are a map
// (memClient); the ConfigMap's write is made outside the clock.
//
// way=source-skipped is the manager's way: a ConfigMap that holds the
// current content changes nothing in a source that reports Programmed, so
// the source's status, which visits every target, is not computed. The
// baseline in the same run, way=source-recomputed, computes it on every
// ConfigMap event, as the manager did before.
//
//	go test ./controllers -run '^$' -bench FlagSetEditStatus -benchtime 200x
func BenchmarkFlagSetEditStatus(b *testing.B) {
	for _, recompute := range []bool{false, true} {
		way := map[bool]string{false: "source-skipped", true: "source-recomputed"}[recompute]
		b.Run("way="+way, func(b *testing.B) {
			small, large := newEditBench(b, 10), newEditBench(b, 10000)
			var took [2]time.Duration
			for b.Loop() {
				for i, e := range []*editBench{small, large} {
					took[i] += e.edit(b, recompute)
				}
			}
			perEdit := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(perEdit(took[0]), "µs/edit@10")
			b.ReportMetric(perEdit(took[1]), "µs/edit@10000")
			b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// memClient is the cache and the API server of the benchmark: objects in a
// map, copied in and out as the informer cache copies them, a write a copy
// and a new resourceVersion. A fake client would cost more per request
// than the status work measured, and hide its ratio.
type memClient struct {
	client.Client // the methods the status workflow does not call
	objs          map[memKey]client.Object
	version       int
}

type memKey struct {
	kind string
	key  client.ObjectKey
}

func keyOf(obj client.Object) memKey {
	return memKey{kind: fmt.Sprintf("%T", obj), key: client.ObjectKeyFromObject(obj)}
}

func (m *memClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	stored, ok := m.objs[memKey{kind: fmt.Sprintf("%T", obj), key: key}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
	return nil
}

func (m *memClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return m.store(obj)
}

func (m *memClient) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return m.store(obj)
}

func (m *memClient) Status() client.SubResourceWriter { return memStatus{m} }

func (m *memClient) store(obj client.Object) error {
	m.version++
	obj.SetResourceVersion(fmt.Sprint(m.version))
	m.objs[keyOf(obj)] = obj.DeepCopyObject().(client.Object)
	return nil
}

// memStatus writes status as the whole object: nothing here writes a spec
// and a status of one object at once.
type memStatus struct{ m *memClient }

func (s memStatus) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return nil
}

func (s memStatus) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return s.m.store(obj)
}

func (s memStatus) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return nil
}

func (s memStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return nil
}

// editBench is a Controller over one flag set and one source that targets
// n Deployments with it (file provider), its statuses in place.
type editBench struct {
	c       *Controller
	cluster *memClient
	ff      *v1beta1.FeatureFlag
	cm      client.ObjectKey
	edits   int
	// statusWrites counts the status writes.
	statusWrites int
}

func newEditBench(b testing.TB, n int) *editBench {
	b.Helper()
	ctx := context.Background()
	settings := workflows.DefaultSettings()
	cluster := &memClient{objs: map[memKey]client.Object{}}

	e := &editBench{cluster: cluster}
	e.c = &Controller{topo: topology.New(settings.FlagSets.TopologyOptions()...), client: cluster}
	e.c.statusWF = &status.Updater{Client: cluster, Settings: settings, Failures: &e.c.failures, Deliveries: &e.c.deliveries,
		Writes: func(string) { e.statusWrites++ }}
	e.c.statuses = newWorkQueue(logr.Discard(), "status", 1, e.c.reconcileStatus)
	e.c.workloads = newWorkQueue(logr.Discard(), "workloads", 1, func(context.Context, topology.Key) error { return nil })
	e.c.flagds = newWorkQueue(logr.Discard(), "flagds", 1, func(context.Context, topology.Key) error { return nil })
	// The ConfigMap workflow, as far as the status sees it: the write is
	// made (outside the clock, in edit) and on its way to the cache.
	e.c.configMaps = newWorkQueue(logr.Discard(), "configmaps", 1, func(_ context.Context, key client.ObjectKey) error {
		replaced := ""
		if cm, ok := cluster.objs[memKey{kind: fmt.Sprintf("%T", &corev1.ConfigMap{}), key: key}]; ok {
			replaced = cm.GetResourceVersion()
		}
		e.c.unseen.Wrote(configMapRef(key), replaced)
		return nil
	})
	e.c.deliveries.track(e.c.configMaps, &e.c.unseen, func(key client.ObjectKey) string {
		if cm, ok := cluster.objs[memKey{kind: fmt.Sprintf("%T", &corev1.ConfigMap{}), key: key}]; ok {
			return cm.GetResourceVersion()
		}
		return ""
	}, e.c.enqueue)
	if err := e.c.route(e.c.kinds(nil)); err != nil {
		b.Fatal(err)
	}
	e.c.ready.Store(true)

	e.ff = &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "flags", UID: "ff", Generation: 1}}
	e.ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"f": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"},
	}
	src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "src", UID: "src", Generation: 1}}
	src.Spec.Sources = []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderFile}}
	src.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, obj := range []client.Object{e.ff, src} {
		if err := cluster.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	for _, err := range []error{second(e.c.topo.UpsertFlagSet(e.ff.DeepCopy())), second(e.c.topo.UpsertSource(src.DeepCopy()))} {
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		if _, err := e.c.topo.UpsertWorkload(topology.Workload{Kind: topology.KindDeployment, Namespace: "ns",
			Name: fmt.Sprintf("w%05d", i), Labels: map[string]string{"app": "web"}}); err != nil {
			b.Fatal(err)
		}
	}
	v := e.c.topo.Snapshot()
	if got, _ := v.FirstWorkloadsOfSource(topology.SourceKey("ns", "src"), 0); got != n {
		b.Fatalf("the source targets %d workloads, want %d", got, n)
	}
	cmKey := topology.ConfigMapKey(topology.FlagSetKey("ns", "flags"), "ns")
	e.cm = configMapObjectKey(cmKey)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.cm.Namespace, Name: e.cm.Name, Labels: workflows.ManagedLabels()}}
	e.writeConfigMap(b, cm)
	if err := cluster.Create(ctx, cm); err != nil {
		b.Fatal(err)
	}
	// Every status in place, as after the startup pass.
	for _, k := range []topology.Key{topology.FlagSetKey("ns", "flags"), topology.SourceKey("ns", "src")} {
		if err := e.c.updateStatus(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
	if got := programmedOf(b, cluster); got != metav1.ConditionTrue {
		b.Fatalf("the source is Programmed %s, want True", got)
	}
	return e
}

// edit makes one edit of the flag set and returns how long its status
// work took. It fails unless the edit made exactly one status write (the
// FeatureFlag's).
func (e *editBench) edit(b *testing.B, recompute bool) time.Duration {
	ctx := context.Background()
	e.edits++
	if err := e.cluster.Get(ctx, client.ObjectKeyFromObject(e.ff), e.ff); err != nil {
		b.Fatal(err)
	}
	e.ff.Generation++
	e.ff.Spec.FlagSpec.Metadata = json.RawMessage(fmt.Sprintf(`{"edit":%d}`, e.edits))
	if err := e.cluster.Update(ctx, e.ff); err != nil {
		b.Fatal(err)
	}
	writes := e.statusWrites

	start := time.Now()
	d, err := e.c.topo.UpsertFlagSet(e.ff.DeepCopy())
	if err != nil {
		b.Fatal(err)
	}
	e.c.dispatch(d)
	e.drainStatuses(b)
	took := time.Since(start)

	// The ConfigMap workflow writes the new content.
	key, _ := e.c.configMaps.queue.Get()
	e.c.configMaps.queue.Done(key)
	e.c.configMaps.queue.Forget(key)
	if err := e.c.configMaps.reconcile(ctx, key); err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := e.cluster.Get(ctx, e.cm, cm); err != nil {
		b.Fatal(err)
	}
	e.writeConfigMap(b, cm)
	if err := e.cluster.Update(ctx, cm); err != nil {
		b.Fatal(err)
	}

	// Its informer event.
	start = time.Now()
	e.c.configMapSeen(cm)
	e.c.onConfigMapEdited(cm)
	if recompute {
		e.c.enqueue(topology.SourceKey("ns", "src"))
	}
	e.drainStatuses(b)
	took += time.Since(start)

	if got := e.statusWrites - writes; got != 1 {
		b.Fatalf("edit %d made %d status writes, want 1", e.edits, got)
	}
	return took
}

// writeConfigMap puts the flag set's current content into cm.
func (e *editBench) writeConfigMap(b testing.TB, cm *corev1.ConfigMap) {
	fs := topology.FlagSetKey("ns", "flags")
	r, ok := e.c.topo.Snapshot().FlagSetRendered(fs)
	if !ok || r.Content == "" {
		b.Fatal("the flag set has no rendering")
	}
	cm.Data = map[string]string{topology.ConfigMapDataKey(fs): r.Content}
}

// drainStatuses reconciles every key on the status queue, and what those
// reconciliations queue.
func (e *editBench) drainStatuses(b *testing.B) {
	for e.c.statuses.Len() > 0 {
		k, _ := e.c.statuses.queue.Get()
		e.c.statuses.queue.Done(k)
		e.c.statuses.queue.Forget(k)
		if err := e.c.statuses.reconcile(context.Background(), k); err != nil {
			b.Fatal(err)
		}
	}
}

func programmedOf(b testing.TB, c client.Client) metav1.ConditionStatus {
	src := &v1beta1.FeatureFlagSource{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "src"}, src); err != nil {
		b.Fatal(err)
	}
	for _, cond := range src.Status.Conditions {
		if cond.Type == v1beta1.ConditionProgrammed {
			return cond.Status
		}
	}
	return "missing"
}

func second[T any](_ T, err error) error { return err }
