package webhooks

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// overLimitManifests: Deployment "big" is targeted by two sources of 250
// kubernetes entries each, which fit flagd's --sources argument one by
// one and not together; Deployment "big-ip" by the same sources and an
// InProcessConfiguration its annotation names.
func overLimitManifests() string {
	var b strings.Builder
	name := func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("f", 250) }
	for i := range 500 {
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlag\nmetadata: {namespace: shop, name: %s}\nspec: {flagSpec: {flags: {}}}\n", name(i))
	}
	for s := range 2 {
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlagSource\nmetadata: {namespace: shop, name: half-%d}\nspec:\n"+
			"  targetRefs: [{group: apps, kind: Deployment, name: big}, {group: apps, kind: Deployment, name: big-ip}]\n  sources:\n", s)
		for i := s * 250; i < s*250+250; i++ {
			fmt.Fprintf(&b, "  - {source: %s, provider: kubernetes}\n", name(i))
		}
	}
	b.WriteString(`---
apiVersion: core.openfeature.dev/v1beta1
kind: InProcessConfiguration
metadata: {namespace: shop, name: in-process}
spec: {}
`)
	for _, d := range []struct{ name, annotations string }{
		{"big", "{}"},
		{"big-ip", `{openfeature.dev/enabled: "true", openfeature.dev/inprocessconfiguration: in-process}`},
	} {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: %[1]s}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s}
      annotations: %[2]s
    spec: {containers: [{name: app, image: app}]}
`, d.name, d.annotations)
	}
	return b.String()
}

// TestPodMutatorRefusesASidecarOverALimit: a pod whose sidecar could not
// start (its --sources argument over Linux's MAX_ARG_STRLEN, made by two
// sources together) is admitted without it, and says why in a warning,
// its annotations and an Event on the workload; it keeps the in-process
// configuration's env vars.
func TestPodMutatorRefusesASidecarOverALimit(t *testing.T) {
	ctx := context.Background()
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(replicaSetMeta("shop", "big-1", "big"), replicaSetMeta("shop", "big-ip-1", "big-ip")).Build()
	graph := newGraph(t, overLimitManifests())
	mutator := func(recorder events.EventRecorder) *PodMutator {
		m := newMutator(t, reader, &recordingEnsurer{})
		m.Graph, m.Events = graph, recorder
		return m
	}

	t.Run("nothing else to inject: the admission record, and why", func(t *testing.T) {
		g := NewWithT(t)
		recorder := events.NewFakeRecorder(10)
		pod := podOwnedBy("ReplicaSet", "big-1", map[string]string{"app": "big"})
		resp := mutator(recorder).Handle(ctx, request(t, admissionv1.Create, pod, false))
		g.Expect(resp.Allowed).To(BeTrue())
		got := patched(t, pod, resp)
		g.Expect(sidecarOf(got)).To(BeNil())
		g.Expect(got.Spec.Containers[0].Env).To(BeEmpty())
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationAdmitted, restarts.AdmittedNothingToInject))
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationRefused, And(
			ContainSubstring("flagd sidecar not injected: flagd's --sources argument would be"),
			ContainSubstring("over the 131071 bytes of MAX_ARG_STRLEN"),
			ContainSubstring("500 flag sources from 2 FeatureFlagSource(s)"))))
		g.Expect(resp.Warnings).To(ContainElement(got.Annotations[restarts.AnnotationRefused]))
		g.Expect(recorder.Events).To(Receive(And(ContainSubstring("Warning "+EventInjectionRefused),
			ContainSubstring("a pod of Deployment big was admitted without its flagd sidecar: flagd sidecar not injected"))))
	})

	t.Run("in-process env vars stay; the fingerprint is the workload's injection", func(t *testing.T) {
		g := NewWithT(t)
		recorder := events.NewFakeRecorder(10)
		pod := podOwnedBy("ReplicaSet", "big-ip-1", map[string]string{"app": "big-ip"})
		pod.Annotations = map[string]string{"openfeature.dev/enabled": "true", "openfeature.dev/inprocessconfiguration": "in-process"}
		resp := mutator(recorder).Handle(ctx, request(t, admissionv1.Create, pod, false))
		got := patched(t, pod, resp)
		g.Expect(sidecarOf(got)).To(BeNil())
		g.Expect(got.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "FLAGD_RESOLVER", Value: "in-process"}))
		g.Expect(got.Annotations).To(HaveKey(restarts.AnnotationRefused))
		want, _ := injection.DesiredWithRefusal(graph.topo.Snapshot(), topology.WorkloadKey(topology.KindDeployment, "shop", "big-ip"), injection.DefaultOptions())
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationInjection, want.Fingerprint()))
		g.Expect(recorder.Events).To(Receive())
	})

	t.Run("a dry run records no Event", func(t *testing.T) {
		g := NewWithT(t)
		recorder := events.NewFakeRecorder(10)
		pod := podOwnedBy("ReplicaSet", "big-1", map[string]string{"app": "big"})
		got := patched(t, pod, mutator(recorder).Handle(ctx, request(t, admissionv1.Create, pod, true)))
		g.Expect(got.Annotations).To(HaveKey(restarts.AnnotationRefused))
		g.Expect(recorder.Events).NotTo(Receive())
	})
}

// TestPodMutatorRefusesASidecarThatMakesThePodTooLarge: a pod that the
// sidecar would make larger than the API server stores gets none, and
// records its workload's injection, so that the healer leaves it be.
func TestPodMutatorRefusesASidecarThatMakesThePodTooLarge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(replicaSetMeta("shop", "web-5d4f8", "web")).Build()
	recorder := events.NewFakeRecorder(10)
	m := newMutator(t, reader, &recordingEnsurer{})
	m.Events = recorder
	pod := podOwnedBy("ReplicaSet", "web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"})
	// 300 bytes under the limit with etcd's overhead: the sidecar alone is more.
	pod.Spec.Containers[0].Args = []string{strings.Repeat("a", injection.MaxPodBytes-1024-300-pod.Size())}
	resp := m.Handle(ctx, request(t, admissionv1.Create, pod, false))
	g.Expect(resp.Allowed).To(BeTrue())
	got := patched(t, pod, resp)
	g.Expect(sidecarOf(got)).To(BeNil())
	g.Expect(got.Spec.Volumes).To(BeEmpty())
	g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationRefused, ContainSubstring("the pod would be")))
	want := injection.Desired(m.Graph.Topology().Snapshot(), topology.WorkloadKey(topology.KindDeployment, "shop", "web"), injection.DefaultOptions())
	g.Expect(want.Sidecar).NotTo(BeNil())
	g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationInjection, want.Fingerprint()))
	g.Expect(got.Annotations).NotTo(HaveKey(restarts.AnnotationAdmitted))
	g.Expect(recorder.Events).To(Receive(ContainSubstring("etcd's request limit")))

	By := "a pod far from the limit gets its sidecar"
	small := podOwnedBy("ReplicaSet", "web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"})
	g.Expect(sidecarOf(patched(t, small, m.Handle(ctx, request(t, admissionv1.Create, small, false))))).NotTo(BeNil(), By)
}

// TestFitAnnotations: flagplane's lists on a pod stay short, and all of a
// pod's annotations within what the API server takes.
func TestFitAnnotations(t *testing.T) {
	list := func(n int, item string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf("%s-%05d", item, i)
		}
		return strings.Join(items, ",")
	}
	t.Run("the unresolved references are cut at an item, with how many more", func(t *testing.T) {
		g := NewWithT(t)
		a := map[string]string{restarts.AnnotationUnresolved: list(5000, "FeatureFlagSource shop/missing")}
		fitAnnotations(a)
		got := a[restarts.AnnotationUnresolved]
		g.Expect(len(got)).To(BeNumerically("<=", maxListBytes))
		g.Expect(got).To(HavePrefix("FeatureFlagSource shop/missing-00000,FeatureFlagSource shop/missing-00001,"))
		g.Expect(got).To(MatchRegexp(`,FeatureFlagSource shop/missing-\d{5},and \d+ more$`))
	})
	t.Run("the incomplete flag sets are cut only to fit the total", func(t *testing.T) {
		g := NewWithT(t)
		incomplete := list(1000, "shop/flags")
		a := map[string]string{restarts.AnnotationIncomplete: incomplete, "team": "shop"}
		fitAnnotations(a)
		g.Expect(a[restarts.AnnotationIncomplete]).To(Equal(incomplete))

		a = map[string]string{restarts.AnnotationIncomplete: incomplete, "big": strings.Repeat("b", maxAnnotationsBytes-10_000)}
		fitAnnotations(a)
		total := 0
		for k, v := range a {
			total += len(k) + len(v)
		}
		g.Expect(total).To(BeNumerically("<=", maxAnnotationsBytes))
		g.Expect(a[restarts.AnnotationIncomplete]).To(MatchRegexp(`^shop/flags-00000,.*,shop/flags-\d{5},and \d+ more$`))
		g.Expect(a["big"]).To(HaveLen(maxAnnotationsBytes-10_000), "the pod's own are not flagplane's to cut")
	})
	t.Run("short lists are left alone", func(t *testing.T) {
		g := NewWithT(t)
		a := map[string]string{restarts.AnnotationUnresolved: "FeatureFlagSource shop/a", restarts.AnnotationIncomplete: "shop/b"}
		fitAnnotations(a)
		g.Expect(a).To(Equal(map[string]string{restarts.AnnotationUnresolved: "FeatureFlagSource shop/a", restarts.AnnotationIncomplete: "shop/b"}))
	})
}

// TestCapWarnings: an admission answers with at most maxWarnings warnings.
func TestCapWarnings(t *testing.T) {
	g := NewWithT(t)
	many := make([]string, 50)
	for i := range many {
		many[i] = fmt.Sprintf("w%d", i)
	}
	got := capWarnings(many)
	g.Expect(got).To(HaveLen(maxWarnings + 1))
	g.Expect(got[maxWarnings]).To(Equal("and 30 more warnings"))
	g.Expect(capWarnings(many[:3])).To(Equal(many[:3]))
}

// TestHealerAndARefusedSidecar: a pod admitted without its sidecar for a
// limit is left be while its workload's injection stays what it recorded,
// and its workload is rolled once that changes.
func TestHealerAndARefusedSidecar(t *testing.T) {
	ctx := context.Background()
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	created := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	const why = "flagd sidecar not injected: the pod would be 1600000 bytes"
	h, _, _, _ := healerFixture(t)
	now := injection.Desired(h.Graph.Topology().Snapshot(), web, h.Options).Fingerprint()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		rolled      bool
	}{
		{"recorded the workload's injection as it is: left be",
			map[string]string{restarts.AnnotationInjection: now, restarts.AnnotationRefused: why}, false},
		{"the workload's injection changed since: rolled",
			map[string]string{restarts.AnnotationInjection: "older", restarts.AnnotationRefused: why}, true},
		{"all of it refused, and the workload's injection is not empty now: rolled",
			map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject, restarts.AnnotationRefused: why}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			refusedPod := pod("web-1-a", "web-1", created, tc.annotations)
			refusedPod.UID = "web-1-a"
			h, c, rec, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), refusedPod)
			g.Expect(h.Heal(ctx, web)).To(BeZero())
			if !tc.rolled {
				g.Expect(restartedAtOf(t, c)).To(BeEmpty())
				return
			}
			g.Expect(restartedAtOf(t, c)).NotTo(BeEmpty())
			g.Expect(<-rec.Events).To(And(ContainSubstring("Warning "+EventInjectionMissing),
				ContainSubstring("pod web-1-a was admitted without its flagd sidecar ("+why+"), and its workload's injection has changed since")))
		})
	}
}
