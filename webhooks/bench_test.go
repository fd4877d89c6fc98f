package webhooks

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/test/admissionfuzz"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// clusterManifests is a graph of n Deployments in n/100 namespaces: in
// each namespace one flag set, a source selecting a third of the
// Deployments by label, one targeting a tenth by targetRefs, and an
// annotated tenth.
func clusterManifests(n int) string { return clusterManifestsWith(n, 1) }

// clusterManifestsWith is clusterManifests with flagSetsPerNS flag sets in
// each namespace: "flags" and extra1, extra2, ..., which the by-ref source
// delivers too (kubernetes provider).
func clusterManifestsWith(n, flagSetsPerNS int) string {
	var b strings.Builder
	perNS := 100
	for ns := 0; ns < n/perNS; ns++ {
		for i := 1; i < flagSetsPerNS; i++ {
			fmt.Fprintf(&b, `---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: ns%d, name: extra%d}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}}}}
`, ns, i)
		}
		extras := ""
		for i := 1; i < flagSetsPerNS; i++ {
			extras += fmt.Sprintf(", {source: extra%d, provider: kubernetes}", i)
		}
		fmt.Fprintf(&b, `---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: ns%[1]d, name: flags}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: ns%[1]d, name: by-label}
spec: {sources: [{source: flags}], selector: {matchLabels: {flags: "yes"}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: ns%[1]d, name: by-ref}
spec:
  sources: [{source: flags, provider: kubernetes}%[2]s]
  targetRefs:
`, ns, extras)
		for d := 0; d < perNS; d += 10 {
			fmt.Fprintf(&b, "  - {group: apps, kind: Deployment, name: d%d}\n", d)
		}
		for d := 0; d < perNS; d++ {
			labels := "{}"
			if d%3 == 0 {
				labels = `{flags: "yes"}`
			}
			annotations := "{}"
			if d%10 == 5 {
				annotations = `{openfeature.dev/enabled: "true", openfeature.dev/featureflagsource: by-label}`
			}
			fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: ns%d, name: d%d, labels: %s}
spec:
  selector: {matchLabels: {app: d%d}}
  template:
    metadata: {labels: {app: d%d}, annotations: %s}
    spec: {containers: [{name: app, image: app}]}
`, ns, d, labels, d, d, annotations)
		}
	}
	return b.String()
}

// admissionFixture is a PodMutator over a graph of n workloads whose cache
// holds every ReplicaSet and generated ConfigMap, and whose API client
// counts (and refuses) every request: admission in the steady state must
// make none.
type admissionFixture struct {
	mutator  *PodMutator
	apiCalls *atomic.Int64
	requests []admission.Request
}

func newAdmissionFixture(tb testing.TB, n int) *admissionFixture {
	tb.Helper()
	g := newGraph(tb, clusterManifests(n))
	v := g.topo.Snapshot()
	var cacheObjs []client.Object
	f := &admissionFixture{apiCalls: &atomic.Int64{}}
	for _, cm := range v.ConfigMaps() {
		cacheObjs = append(cacheObjs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: topology.ConfigMapName(cm.FlagSet())}})
	}
	for i, w := range v.Workloads() {
		rs := w.Name + "-7d9f5"
		cacheObjs = append(cacheObjs, replicaSetMeta(w.Namespace, rs, w.Name))
		if i%7 == 0 { // a sample of pods, targeted or not
			p := podOwnedBy("ReplicaSet", rs, map[string]string{"app": w.Name, "pod-template-hash": "7d9f5"})
			wl, _ := v.Workload(w)
			p.Annotations = maps.Clone(wl.PodAnnotations) // pods carry their template's annotations
			f.requests = append(f.requests, request(tb, admissionv1.Create, p, false))
			f.requests[len(f.requests)-1].Namespace = w.Namespace
		}
	}
	cache := fake.NewClientBuilder().WithScheme(testScheme(tb)).WithObjects(cacheObjs...).Build()
	refuse := func(string) error { f.apiCalls.Add(1); return fmt.Errorf("no API request on the admission path") }
	api := fake.NewClientBuilder().WithScheme(testScheme(tb)).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return refuse("get")
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return refuse("list")
		},
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return refuse("create")
		},
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return refuse("patch")
		},
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			return refuse("apply")
		},
	}).Build()
	f.mutator = &PodMutator{
		Graph:        g,
		Resolver:     restarts.Owners{Reader: cache},
		ConfigMaps:   NewConfigMapEnsurer(cache, api, api, workflows.DefaultSettings()),
		Options:      injection.DefaultOptions(),
		WorkloadWait: time.Second,
	}
	return f
}

// TestAdmissionMakesNoAPIRequest: with 10k workloads in the graph and the
// caches warm, admitting pods makes no API request, and targeted pods get
// their sidecar.
func TestAdmissionMakesNoAPIRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a graph of 10k workloads")
	}
	f := newAdmissionFixture(t, 10_000)
	injected := 0
	for _, req := range f.requests {
		resp := f.mutator.Handle(context.Background(), req)
		if !resp.Allowed {
			t.Fatalf("denied: %v", resp.Result)
		}
		if slices.ContainsFunc(resp.Patches, func(op jsonpatch.JsonPatchOperation) bool { return strings.HasPrefix(op.Path, "/spec/") }) {
			injected++ // the others get their admission record only
		}
	}
	if n := f.apiCalls.Load(); n != 0 {
		t.Fatalf("%d API requests on the admission path", n)
	}
	if injected == 0 || injected == len(f.requests) {
		t.Fatalf("%d of %d pods injected: want targeted ones only", injected, len(f.requests))
	}
}

// BenchmarkAdmission measures the Pod webhook's handler (decode, resolve
// the workload through the ReplicaSet cache, compute and apply the
// injection, encode the patch) with 10k workloads in the graph, and reports
// its latency percentiles. Goal: p99 under 2 ms, no API request.
func BenchmarkAdmission(b *testing.B) {
	f := newAdmissionFixture(b, 10_000)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := f.requests[i%len(f.requests)]
		start := time.Now()
		resp := f.mutator.Handle(ctx, req)
		lat = append(lat, time.Since(start))
		if !resp.Allowed {
			b.Fatalf("denied: %v", resp.Result)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Nanoseconds()) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(f.apiCalls.Load()), "api-requests")
}

// BenchmarkValidatorBlastRadius is a FeatureFlag and a FeatureFlagSource
// update admitted with 10,000 workloads in the graph, with the blast-radius
// warning (graph) and without it (baseline: validation alone), reporting
// p50 and p99 per request.
func BenchmarkValidatorBlastRadius(b *testing.B) {
	g := newGraph(b, clusterManifestsWith(10000, 10))
	v := g.topo.Snapshot()
	ff, _ := v.FlagSet(topology.FlagSetKey("ns0", "flags"))
	editedFF := ff.DeepCopy()
	flag := editedFF.Spec.FlagSpec.Flags["f"]
	flag.DefaultVariant = "on"
	editedFF.Spec.FlagSpec.Flags["f"] = flag
	src, _ := v.Source(topology.SourceKey("ns0", "by-label"))
	editedSrc := src.DeepCopy()
	editedSrc.Spec.Port = 9013
	ffReq := admissionOf(b, admissionv1.Update, editedFF, ff)
	srcReq := admissionOf(b, admissionv1.Update, editedSrc, src)
	for _, c := range []struct {
		name    string
		handler admission.Handler
		req     admission.Request
	}{
		{"featureflag/baseline", &FlagSetValidator{}, ffReq},
		{"featureflag/graph", &FlagSetValidator{Graph: g}, ffReq},
		{"featureflagsource/baseline", &SourceValidator{Injection: injection.DefaultOptions()}, srcReq},
		{"featureflagsource/graph", &SourceValidator{Graph: g, Injection: injection.DefaultOptions()}, srcReq},
	} {
		b.Run(c.name, func(b *testing.B) {
			// The garbage of parsing 10,000 manifests is the benchmark's,
			// not admission's: collect it before measuring. The collections
			// that the requests' own allocations cause are measured.
			goruntime.GC()
			// The collections the requests cause are counted: with a small
			// heap, the p99 is mostly the requests that ran while one marked.
			cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
			gcCycles := func() uint64 { metrics.Read(cycles); return cycles[0].Value.Uint64() }
			gcBefore := gcCycles()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				resp := c.handler.Handle(context.Background(), c.req)
				took = append(took, time.Since(start))
				if !resp.Allowed {
					b.Fatalf("refused: %v", resp.Result)
				}
			}
			gcs := gcCycles() - gcBefore
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(1000*float64(gcs)/float64(len(took)), "gc/1k-req")
		})
	}
}

// BenchmarkConcurrentRuleBoundAdmissions is what n FeatureFlag admissions
// at once cost the manager when each is the flag set of rules at the
// 50,000-value bound, 64 deep (373 KB; see TestAdmissionExtremes): the
// slowest answer, the CPU time, the most memory the process held from the
// system meanwhile, and how many were refused as busy. Without a budget,
// every admission is judged at once; with the default budget (budget.go),
// one namespace's are judged one at a time, and those of n namespaces two
// at a time. The chart gives the manager 512Mi. One at a time with no
// budget is the baseline of the same run.
func BenchmarkConcurrentRuleBoundAdmissions(b *testing.B) {
	req := fuzzRequest("FeatureFlag", flagSetAtValues(flagsets.MaxRuleDepth, flagsets.MaxRuleValues), "", false)
	for _, n := range []int{1, 4, 8} {
		for _, c := range []struct {
			name       string
			budget     bool
			namespaces int
		}{{"budget=none", false, 1}, {"budget=default/namespaces=1", true, 1}, {"budget=default/namespaces=n", true, n}} {
			if n == 1 && c.budget {
				continue // one admission is never refused
			}
			b.Run(fmt.Sprintf("at-once=%d/%s", n, c.name), func(b *testing.B) {
				validator := flagSetValidators(b)[0]
				var budget *Budget
				if c.budget {
					budget = NewBudget(DefaultAdmissionBytes, DefaultAdmissionWait)
				}
				var slowest time.Duration
				var peak uint64
				var cpu time.Duration
				var refused atomic.Int64
				for range b.N {
					stop := watchMemory(&peak)
					cost := admissionfuzz.Measure(func() {
						var wg sync.WaitGroup
						answers := make([]time.Duration, n)
						for i := range n {
							wg.Go(func() {
								start := time.Now()
								resp := inTurn(budget, validator, inNamespace(req, fmt.Sprintf("tenant-%d", i%c.namespaces)))
								answers[i] = time.Since(start)
								switch {
								case resp.Allowed:
								case c.budget && resp.Result != nil && resp.Result.Code == http.StatusTooManyRequests:
									refused.Add(1)
								default:
									b.Errorf("refused: %v", resp.Result)
								}
							})
						}
						wg.Wait()
						slowest = max(slowest, slices.Max(answers))
					})
					stop()
					cpu += cost.CPU
				}
				b.ReportMetric(float64(slowest.Milliseconds()), "slowest-ms")
				b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(peak>>20), "peak-MiB")
				b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
			})
		}
	}
}

// inTurn is h's answer to req once it has taken the bytes of req's objects
// from budget, as budgeted takes those of its request before h reads it;
// budget's refusal when it cannot.
func inTurn(budget *Budget, h admission.Handler, req admission.Request) admission.Response {
	release, err := budget.Take(context.Background(), req.Namespace, int64(len(req.Object.Raw)+len(req.OldObject.Raw)))
	if err != nil {
		return busy(err)
	}
	defer release()
	return h.Handle(context.Background(), req)
}

// watchMemory samples the memory the process holds from the system (what
// the Go runtime mapped, less what it gave back) every 20 ms into peak, the
// largest seen, until the function it returns is called. It first gives
// back what earlier work left, so that peak is this work's.
func watchMemory(peak *uint64) (stop func()) {
	debug.FreeOSMemory()
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			metrics.Read(sample)
			*peak = max(*peak, sample[0].Value.Uint64()-sample[1].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}
