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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
)

// benchEditsEnv sets how many edits each provider is timed over.
const benchEditsEnv = "FLAGPLANE_REALNODE_BENCH_EDITS"

// The delivery figures of docs/benchmarks.md: for each provider, from a
// FeatureFlag edit to its copies holding it (status: written), to the
// running flagd serving it (asked directly: served), and to status saying
// the pod's flagd answers with it (confirmed), on the real kubelet with
// the suite's syncFrequency (make bench runs it with the kubelet's default
// and with 1s). Each provider reads a FeatureFlag of its own, all edited
// at once. Run by `make bench` only (label bench).
var _ = Describe("delivery figures on a real kubelet", Label("bench"), func() {
	It("times each provider from a FeatureFlag edit to written, to the running flagd serving it, and to confirmed", func(ctx SpecContext) {
		edits := 10
		if v, err := strconv.Atoi(os.Getenv(benchEditsEnv)); err == nil && v > 0 {
			edits = v
		}
		ns := newNamespace(ctx, "bench")
		create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes"}})
		providers := []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy}
		flagSets := map[v1beta1.SyncProviderType]*v1beta1.FeatureFlag{}
		pods := map[v1beta1.SyncProviderType]*corev1.Pod{}
		for _, p := range providers {
			name := strings.ReplaceAll(string(p), "-", "")
			flagSets[p] = revisionFlagSet(ns, "flags-"+name)
			d := app(ns, name, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: name})
			if p == v1beta1.SyncProviderKubernetes {
				d.Spec.Template.Spec.ServiceAccountName = "kubernetes"
			}
			create(ctx, flagSets[p], fixtures.Source(ns, name, []v1beta1.Source{{Source: "flags-" + name, Provider: p}}), d)
		}
		for _, p := range providers {
			pods[p] = injectedPod(ctx, ns, strings.ReplaceAll(string(p), "-", ""))
		}
		ws := make([]watched, len(providers))
		for i, p := range providers {
			ws[i] = watched{ff: flagSets[p], pod: pods[p], confirmable: p != v1beta1.SyncProviderKubernetes}
		}
		watchEdits(ctx, ws, revisionFlag, "r0", time.Now())
		times := map[v1beta1.SyncProviderType][]editTimes{}
		for i := 1; i <= edits && i < revisions; i++ {
			variant := fmt.Sprintf("r%d", i)
			edited := time.Now()
			for _, p := range providers {
				setRevision(ctx, flagSets[p], variant)
			}
			for j, t := range watchEdits(ctx, ws, revisionFlag, variant, edited) {
				Expect(t.ahead).To(BeZero(), "%s: status ahead of flagd", providers[j])
				times[providers[j]] = append(times[providers[j]], t)
			}
		}
		sync := "the kubelet's default (1m)"
		if suiteSyncFrequency() > 0 {
			sync = suiteSyncFrequency().String()
		}
		var table strings.Builder
		fmt.Fprintf(&table, "edit to written (status), to served (the pod's flagd, asked every 20 ms), to confirmed (status), %d edits, kubelet syncFrequency %s; median / p90 / max\n", edits, sync)
		fmt.Fprintf(&table, "| provider | written | served | confirmed |\n|---|--:|--:|--:|\n")
		for _, p := range providers {
			col := func(get func(editTimes) time.Duration) string {
				var d []time.Duration
				for _, t := range times[p] {
					if v := get(t); v > 0 {
						d = append(d, v)
					}
				}
				if len(d) == 0 {
					return "–"
				}
				sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
				return fmt.Sprintf("%s / %s / %s", fmtDuration(d[len(d)/2]), fmtDuration(d[len(d)*9/10]), fmtDuration(d[len(d)-1]))
			}
			fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", p, col(func(t editTimes) time.Duration { return t.written }),
				col(func(t editTimes) time.Duration { return t.served }), col(func(t editTimes) time.Duration { return t.confirmed }))
		}
		AddReportEntry("delivery on a real kubelet", table.String())
		fmt.Fprint(GinkgoWriter, table.String())
		fmt.Print(table.String())
	})

	It("starts a staged step's pause when the canary's pods serve the revision, as their flagd answers directly", func(ctx SpecContext) {
		edits := 3
		ns := newNamespace(ctx, "stagedbench")
		ff := revisionFlagSet(ns, "flags")
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderFile}}),
			app(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}))
		pod := injectedPod(ctx, ns, "web")
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "flags"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", Percentage: ptr.To[int32](100), Pause: &metav1.Duration{Duration: 10 * time.Second}},
					{Name: "done", Percentage: ptr.To[int32](100)},
				},
			},
		}
		create(ctx, policy)
		w := []watched{{ff: ff, pod: pod, confirmable: true}}
		watchEdits(ctx, w, revisionFlag, "r0", time.Now())
		var rows []string
		for i := 1; i <= edits; i++ {
			variant := fmt.Sprintf("r%d", i)
			edited := time.Now()
			setRevision(ctx, ff, variant)
			t := watchEdits(ctx, w, revisionFlag, variant, edited)[0]
			Expect(t.ahead).To(BeZero())
			served := edited.Add(t.served)
			var cur v1beta1.FeatureFlag
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur)).To(Succeed())
			var got deliveryv1alpha1.FeatureFlagRolloutPolicy
			Eventually(func() (*metav1.Time, error) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), &got)
				if got.Status.TargetRevision != cur.Status.Revision || got.Status.Step != 0 {
					return nil, err
				}
				return got.Status.StepServedAt, err
			}).WithTimeout(time.Minute).ShouldNot(BeNil(), "the canary step of revision %s, served", cur.Status.Revision)
			// stepServedAt has seconds: it may read up to 1 s before the
			// moment flagd was seen serving, never more.
			after := got.Status.StepServedAt.Sub(served)
			Expect(after).To(BeNumerically(">", -time.Second-50*time.Millisecond), "the pause started before the canary's flagd served the revision")
			rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s | %s |", i, fmtDuration(t.written), fmtDuration(t.served), fmtDuration(t.confirmed), fmtDuration(after)))
			Eventually(func() (deliveryv1alpha1.RolloutPhase, error) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), &got)
				return got.Status.Phase, err
			}).WithTimeout(3 * time.Minute).Should(Equal(deliveryv1alpha1.PhaseCompleted))
		}
		sync := "the kubelet's default (1m)"
		if suiteSyncFrequency() > 0 {
			sync = suiteSyncFrequency().String()
		}
		table := fmt.Sprintf("a staged step (file provider, pause 10s), kubelet syncFrequency %s\n"+
			"| edit | written | canary's flagd serves it | status confirms it | pause started after flagd served (stepServedAt has seconds) |\n|--:|--:|--:|--:|--:|\n%s\n",
			sync, strings.Join(rows, "\n"))
		AddReportEntry("staged step on a real kubelet", table)
		fmt.Print(table)
	})
})
