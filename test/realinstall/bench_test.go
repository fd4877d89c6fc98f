package realinstall

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
)

// benchEditsEnv sets how many edits each provider is timed over.
const benchEditsEnv = "FLAGPLANE_REALNODE_BENCH_EDITS"

// The delivery figures of docs/benchmarks.md: for each provider, the time
// from a FeatureFlag edit to the running flagd serving it, on the real
// kubelet with the suite's syncFrequency (make bench runs it with the
// kubelet's default and with 1s). Run by `make bench` only (label bench).
var _ = Describe("delivery figures on a real kubelet", Label("bench"), func() {
	It("times each provider from a FeatureFlag edit to the running flagd serving it", func(ctx SpecContext) {
		edits := 10
		if v, err := strconv.Atoi(os.Getenv(benchEditsEnv)); err == nil && v > 0 {
			edits = v
		}
		ns := newNamespace(ctx, "bench")
		ff := revisionFlagSet(ns, "flags")
		create(ctx, ff, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes"}})
		providers := []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy}
		addrs := map[v1beta1.SyncProviderType]string{}
		for _, p := range providers {
			name := strings.ReplaceAll(string(p), "-", "")
			d := app(ns, name, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: name})
			if p == v1beta1.SyncProviderKubernetes {
				d.Spec.Template.Spec.ServiceAccountName = "kubernetes"
			}
			create(ctx, fixtures.Source(ns, name, []v1beta1.Source{{Source: "flags", Provider: p}}), d)
		}
		for _, p := range providers {
			addrs[p] = flagdAddr(readyPod(ctx, ns, strings.ReplaceAll(string(p), "-", "")))
		}
		servedAt := func(addr string, rev int) func() bool {
			return func() bool {
				e, err := flagdapi.Resolve(ctx, addr, flagdapi.Int, revisionFlag, nil)
				return err == nil && e.Variant == fmt.Sprintf("r%d", rev)
			}
		}
		for _, p := range providers {
			Eventually(servedAt(addrs[p], 0)).WithTimeout(3 * time.Minute).Should(BeTrue())
		}
		took := map[v1beta1.SyncProviderType][]time.Duration{}
		for i := 1; i <= edits && i < revisions; i++ {
			var cur v1beta1.FeatureFlag
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur)).To(Succeed())
			f := cur.Spec.FlagSpec.Flags[revisionFlag]
			f.DefaultVariant = fmt.Sprintf("r%d", i)
			cur.Spec.FlagSpec.Flags[revisionFlag] = f
			edited := time.Now()
			Expect(k8s.Update(ctx, &cur)).To(Succeed())
			pending := map[v1beta1.SyncProviderType]bool{}
			for _, p := range providers {
				pending[p] = true
			}
			// Polled every 20 ms, all providers at once, so that each time is
			// its own and none waits for another.
			Eventually(func() int {
				for p := range pending {
					if servedAt(addrs[p], i)() {
						took[p] = append(took[p], time.Since(edited))
						delete(pending, p)
					}
				}
				return len(pending)
			}).WithTimeout(3 * time.Minute).WithPolling(20 * time.Millisecond).Should(BeZero())
		}
		sync := "the kubelet's default (1m)"
		if suiteSyncFrequency() > 0 {
			sync = suiteSyncFrequency().String()
		}
		var table strings.Builder
		fmt.Fprintf(&table, "edit to the running flagd serving it, %d edits, kubelet syncFrequency %s\n", edits, sync)
		fmt.Fprintf(&table, "| provider | min | median | p90 | max |\n|---|--:|--:|--:|--:|\n")
		for _, p := range providers {
			d := took[p]
			sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
			fmt.Fprintf(&table, "| %s | %s | %s | %s | %s |\n", p, fmtDuration(d[0]), fmtDuration(d[len(d)/2]), fmtDuration(d[len(d)*9/10]), fmtDuration(d[len(d)-1]))
		}
		AddReportEntry("delivery on a real kubelet", table.String())
		fmt.Fprint(GinkgoWriter, table.String())
		fmt.Print(table.String())
	})
})
