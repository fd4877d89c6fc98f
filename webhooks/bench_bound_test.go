package webhooks

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
								resp := r.h.Handle(context.Background(), inNamespace(r.req, fmt.Sprintf("tenant-%d", i)))
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
