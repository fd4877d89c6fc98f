package counts

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
)

// injectionTimes admits count pods of a workload's ReplicaSet as dry runs
// (the webhook computes the whole injection, and writes nothing) and
// returns how long the API server spent in the Pod webhook for each.
func injectionTimes(ctx context.Context, ns, app string, count int) []time.Duration {
	GinkgoHelper()
	pod := readyPod(ctx, ns, app, injected(), 3*time.Minute)
	owner := metav1.GetControllerOf(pod)
	Expect(owner).NotTo(BeNil())
	// The pod as its ReplicaSet makes it: the template's annotations too,
	// which the webhook waits for the graph to know (WorkloadWait).
	annotations := map[string]string{}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, "openfeature.dev/") {
			annotations[k] = v
		}
	}
	var out []time.Duration
	for range count {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: app + "-", Labels: pod.Labels,
			Annotations: annotations, OwnerReferences: []metav1.OwnerReference{*owner}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: appImage}}}}
		out = append(out, timedCall(ctx, podWebhook, func() { Expect(k8s.Create(ctx, p, client.DryRunAll)).To(Succeed()) }))
	}
	return out
}

var _ = Describe("a workload with 20 sources", func() {
	It("merges 20 sources its annotation lists, and 20 that select it, into one flagd that serves the flag sets of every one", func(ctx SpecContext) {
		ns := newNamespace(ctx, "")
		flagSets(ctx, ns, 100, shortName)
		var names []string
		for s := range 20 {
			name := fmt.Sprintf("annotated-%02d", s)
			names = append(names, name)
			create(ctx, fixtures.Source(ns, name, entries(v1beta1.SyncProviderFile, 5*s, 5*s+5, shortName), ownUser(41200)))
			create(ctx, fixtures.Source(ns, fmt.Sprintf("selecting-%02d", s), entries(v1beta1.SyncProviderFlagdProxy, 5*s, 5*s+5, shortName),
				fixtures.Selecting("flags", "all")))
		}
		annotated := deployment(ns, "annotated", map[string]string{v1beta1.AnnotationEnabled: "true",
			v1beta1.AnnotationFeatureFlagSource: strings.Join(names, ",")})
		selected := deployment(ns, "selected", nil)
		selected.Labels = map[string]string{"flags": "all"}
		// One source alone, for the baseline of the injection time.
		create(ctx, annotated, selected,
			fixtures.Source(ns, "one", entries(v1beta1.SyncProviderFlagdProxy, 0, 5, shortName), fixtures.Targeting("Deployment", "single")),
			deployment(ns, "single", nil))

		for _, app := range []string{"annotated", "selected"} {
			pod := readyPod(ctx, ns, app, injected(), 2*time.Minute)
			Expect(sourcesOf(sidecarOf(pod))).To(HaveLen(100), app)
			addr := flagdAddr(pod)
			for s := range 20 {
				Eventually(resolve(addr, flagKey(5*s+4))).Should(Equal(on), "%s: the last flag set of source %d", app, s)
			}
		}

		By("the injection time, as the API server measures the webhook call: 20 sources against one")
		for _, app := range []string{"single", "selected", "annotated"} {
			p50, maximum := percentiles(injectionTimes(ctx, ns, app, 7))
			AddReportEntry("Pod webhook, "+app, fmt.Sprintf("p50 %v, max %v", p50, maximum))
		}
	})

	It("merges 20 sources that name it in targetRefs, and tells each one that loses a setting to a later one", func(ctx SpecContext) {
		ns := newNamespace(ctx, "")
		flagSets(ctx, ns, 20, shortName)
		for s := range 20 {
			create(ctx, fixtures.Source(ns, fmt.Sprintf("src-%02d", s), entries(v1beta1.SyncProviderFlagdProxy, s, s+1, shortName),
				fixtures.Targeting("Deployment", "web"), func(src *v1beta1.FeatureFlagSource) { src.Spec.DebugLogging = ptr.To(s%2 == 0) }))
		}
		create(ctx, deployment(ns, "web", nil))
		pod := readyPod(ctx, ns, "web", injected(), time.Minute)
		Expect(sourcesOf(sidecarOf(pod))).To(HaveLen(20))
		addr := flagdAddr(pod)
		Eventually(resolve(addr, flagKey(19))).Should(Equal(on))
		By("the merge's conflicts: each source that loses debugLogging to a later one is told")
		Eventually(programmed(ctx, ns, "src-00")).Should(HaveField("Reason", v1beta1.ReasonSettingsConflict))
	})
})
