package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/test/admissionfuzz"
)

// boundRequests are the largest requests the spec author and the Pod
// webhook are sent: an update of a FeatureFlag whose spec of 3 MiB of
// flags changes in its last flag, and a pod of 1.4 MiB of environment
// variables, under etcd's limit with its injection.
func boundRequests(tb testing.TB) map[string]struct {
	h   admission.Handler
	req admission.Request
} {
	entry := len(`"f00000":`) + len(okFlag) + 2
	n := (admissionfuzz.MaxRequestBytes - 400) / entry
	object := unread(manyFlags(n, okFlag+"}"))
	old := strings.Replace(object, `"f`+itoa(n-1)+`":`+okFlag, `"f`+itoa(n-1)+`":`+strings.Replace(okFlag, `"defaultVariant":"on"`, `"defaultVariant":"off"`, 1), 1)
	author := fuzzRequest("FeatureFlag", object, old, true)

	owner := `"ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","controller":true}]`
	env := make([]string, 0, 45000)
	for i := 0; len(env)*32 < 1400<<10; i++ {
		env = append(env, fmt.Sprintf(`{"name":"V%06d","value":"%d"}`, i, i))
	}
	pod := `{"metadata":{` + owner + `},"spec":{"containers":[{"name":"app","image":"app","env":[` + strings.Join(env, ",") + `]}]}}`
	req := fuzzRequest("Pod", pod, "", false)
	req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	req.Object = runtime.RawExtension{Raw: []byte(pod)}
	req.Operation = admissionv1.Create
	pods := newMutator(tb, fake.NewClientBuilder().WithScheme(testScheme(tb)).Build(), &recordingEnsurer{})
	pods.Graph = newGraph(tb, graphManifests+"\n---\n"+fuzzManifests)
	pods.WorkloadWait = 0
	return map[string]struct {
		h   admission.Handler
		req admission.Request
	}{"spec-author": {SpecAuthor{}, author}, "pod": {pods, req}}
}

// BenchmarkConcurrentBoundAdmissions is what n admissions at once of
// boundRequests cost: the most memory the process held from the system
// meanwhile, and the CPU time. The spec author's runs without its budget,
// as the Pod webhook, which has none: what the budget bounds is
// BenchmarkConcurrentRuleBoundAdmissions'.
func BenchmarkConcurrentBoundAdmissions(b *testing.B) {
	for name, r := range boundRequests(b) {
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/at-once=%d/bytes=%d", name, n, len(r.req.Object.Raw)+len(r.req.OldObject.Raw)), func(b *testing.B) {
				var peak uint64
				var cpu time.Duration
				for range b.N {
					stop := watchMemory(&peak)
					cost := admissionfuzz.Measure(func() {
						var wg sync.WaitGroup
						for i := range n {
							wg.Go(func() {
								req := r.req
								if name == "spec-author" {
									req = inNamespace(req, fmt.Sprintf("tenant-%d", i))
								} // a pod stays in shop, where its workload is, and gets its sidecar
								resp := r.h.Handle(context.Background(), req)
								if !resp.Allowed {
									b.Errorf("refused: %v", resp.Result)
								}
							})
						}
						wg.Wait()
					})
					stop()
					cpu += cost.CPU
				}
				b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(peak>>20), "peak-MiB")
			})
		}
	}
}

// BenchmarkBurstsAtTheBound is what a burst of n of boundRequests, at
// once, from one namespace and through the webhook's HTTP server, costs:
// the most memory the process held meanwhile (each request's body read and
// decoded), the slowest answer and how many were refused with 429. With
// the default budget (budgeted), a request waits for its bytes before it
// is read whole, and one namespace's are read one at a time; the baseline
// of the same run has no budget.
func BenchmarkBurstsAtTheBound(b *testing.B) {
	for _, name := range []string{"spec-author", "pod"} {
		r := boundRequests(b)[name]
		review := reviewOf(b, r.req)
		for _, n := range []int{8, 32} {
			for _, budget := range []string{"none", "default"} {
				b.Run(fmt.Sprintf("%s/at-once=%d/budget=%s", name, n, budget), func(b *testing.B) {
					var h http.Handler = &admission.Webhook{Handler: r.h}
					if budget == "default" {
						h = budgeted{NewBudget(DefaultAdmissionBytes, DefaultAdmissionWait), h}
					}
					srv := httptest.NewServer(h)
					defer srv.Close()
					var peak uint64
					var slowest time.Duration
					var refused atomic.Int64
					for range b.N {
						stop := watchMemory(&peak)
						var wg sync.WaitGroup
						answers := make([]time.Duration, n)
						for i := range n {
							wg.Go(func() {
								start := time.Now()
								defer func() { answers[i] = time.Since(start) }()
								resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(review))
								if err != nil {
									b.Error(err)
									return
								}
								defer resp.Body.Close()
								var answer admissionv1.AdmissionReview
								if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Response == nil {
									b.Errorf("no answer: %v", err)
									return
								}
								if !answer.Response.Allowed {
									if answer.Response.Result == nil || answer.Response.Result.Code != http.StatusTooManyRequests {
										b.Errorf("refused: %+v", answer.Response.Result)
									}
									refused.Add(1)
								}
							})
						}
						wg.Wait()
						stop()
						slowest = max(slowest, slices.Max(answers))
					}
					b.ReportMetric(float64(peak>>20), "peak-MiB")
					b.ReportMetric(float64(slowest.Milliseconds()), "slowest-ms")
					b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
				})
			}
		}
	}
}
