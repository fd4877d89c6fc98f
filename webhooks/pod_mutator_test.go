package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/restarts"
)

const graphManifests = `
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: checkout}
spec:
  flagSpec:
    flags:
      new-checkout: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: flags}
spec:
  sources: [{source: checkout}]
  targetRefs:
  - {group: apps, kind: Deployment, name: web}
  - {group: apps, kind: StatefulSet, name: db}
  - {group: apps, kind: DaemonSet, name: agent}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: annotated}
spec:
  sources: [{source: checkout}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: opted-in}
spec:
  selector: {matchLabels: {app: opted-in}}
  template:
    metadata:
      labels: {app: opted-in}
      annotations: {openfeature.dev/enabled: "true", openfeature.dev/featureflagsource: annotated}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: plain}
spec:
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {namespace: shop, name: db}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: db}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {namespace: shop, name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: agent}]}
`

type staticGraph struct {
	topo  *topology.Topology
	built bool
}

func (g *staticGraph) Topology() *topology.Topology { return g.topo }
func (g *staticGraph) GraphBuilt() bool             { return g.built }

func newGraph(t testing.TB, objects string) *staticGraph {
	t.Helper()
	topo := topology.New()
	if err := manifests.Load(topo, strings.NewReader(objects)); err != nil {
		t.Fatal(err)
	}
	return &staticGraph{topo: topo, built: true}
}

// recordingEnsurer records the ConfigMaps it is asked to ensure.
type recordingEnsurer struct {
	mu    sync.Mutex
	calls []topology.Key
	fail  error
}

func (r *recordingEnsurer) Ensure(_ context.Context, _ *topology.View, key topology.Key) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, key)
	return r.fail
}

func testScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func replicaSetMeta(ns, name, deployment string) *metav1.PartialObjectMetadata {
	rs := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: "d", Controller: ptr.To(true)}}}}
	rs.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	return rs
}

func podOwnedBy(kind, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
}

func request(t testing.TB, op admissionv1.Operation, pod *corev1.Pod, dryRun bool) admission.Request {
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: op, Namespace: "shop", DryRun: ptr.To(dryRun),
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// patched applies a response's patches to the pod.
func patched(t testing.TB, pod *corev1.Pod, resp admission.Response) *corev1.Pod {
	t.Helper()
	raw, _ := json.Marshal(pod)
	if len(resp.Patches) == 0 {
		return pod
	}
	ops, _ := json.Marshal(resp.Patches)
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func newMutator(t testing.TB, reader client.Reader, ensurer ConfigMaps) *PodMutator {
	return &PodMutator{
		Graph:        newGraph(t, graphManifests),
		Resolver:     restarts.Owners{Reader: reader},
		ConfigMaps:   ensurer,
		Options:      injection.DefaultOptions(),
		WorkloadWait: 50 * time.Millisecond,
	}
}

func sidecarOf(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == injection.SidecarName {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

func TestPodMutator(t *testing.T) {
	ctx := context.Background()
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(replicaSetMeta("shop", "web-5d4f8", "web")).Build()
	cmKey := topology.ConfigMapKey(topology.FlagSetKey("shop", "checkout"), "shop")

	t.Run("a pod of a targeted Deployment gets the sidecar, volume, env and annotation; its ConfigMap is ensured", func(t *testing.T) {
		g := NewWithT(t)
		ens := &recordingEnsurer{}
		pod := podOwnedBy("ReplicaSet", "web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"})
		resp := newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Create, pod, false))
		g.Expect(resp.Allowed).To(BeTrue())
		got := patched(t, pod, resp)
		g.Expect(sidecarOf(got)).NotTo(BeNil())
		g.Expect(sidecarOf(got).RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
		g.Expect(got.Spec.Volumes).To(HaveLen(1))
		g.Expect(got.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "FLAGD_RESOLVER", Value: "rpc"}))
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationInjection, Not(BeEmpty())))
		g.Expect(got.Annotations).NotTo(HaveKey(injection.AnnotationAllowKubernetesSync), "the file provider")
		g.Expect(ens.calls).To(ConsistOf(cmKey))

		By := "the same pod again (reinvocation, or re-created from its own YAML) is left alone"
		again := patched(t, got, newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Create, got, false)))
		g.Expect(again).To(Equal(got), By)
	})

	t.Run("a pod whose sidecar syncs with the kubernetes provider is marked as the OpenFeature Operator marks it", func(t *testing.T) {
		g := NewWithT(t)
		m := newMutator(t, reader, &recordingEnsurer{})
		m.Graph = newGraph(t, graphManifests+`
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: kube}
spec:
  sources: [{source: checkout, provider: kubernetes}]
  targetRefs: [{group: apps, kind: Deployment, name: reader}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: reader}
spec:
  selector: {matchLabels: {app: reader}}
  template:
    metadata: {labels: {app: reader}}
    spec: {containers: [{name: app, image: app}]}
`)
		pod := podOwnedBy("ReplicaSet", "reader-77c9d", map[string]string{"app": "reader", "pod-template-hash": "77c9d"})
		got := patched(t, pod, m.Handle(ctx, request(t, admissionv1.Create, pod, false)))
		g.Expect(sidecarOf(got)).NotTo(BeNil())
		g.Expect(got.Annotations).To(HaveKeyWithValue("openfeature.dev/allowkubernetessync", "true"))
	})

	t.Run("a pod whose annotations name a source that does not exist gets the rest, and is marked for the healer", func(t *testing.T) {
		g := NewWithT(t)
		m := newMutator(t, reader, &recordingEnsurer{})
		annotations := map[string]string{"openfeature.dev/enabled": "true", "openfeature.dev/featureflagsource": "annotated,missing"}
		m.Graph = newGraph(t, graphManifests+`
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: partial}
spec:
  selector: {matchLabels: {app: partial}}
  template:
    metadata:
      labels: {app: partial}
      annotations: {openfeature.dev/enabled: "true", openfeature.dev/featureflagsource: "annotated,missing"}
    spec: {containers: [{name: app, image: app}]}
`)
		pod := podOwnedBy("ReplicaSet", "partial-6b7c8", map[string]string{"app": "partial", "pod-template-hash": "6b7c8"})
		pod.Annotations = annotations
		resp := m.Handle(ctx, request(t, admissionv1.Create, pod, false))
		got := patched(t, pod, resp)
		g.Expect(sidecarOf(got)).NotTo(BeNil(), "what resolves is injected")
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationUnresolved, "FeatureFlagSource shop/missing"))
		g.Expect(resp.Warnings).To(ContainElement(ContainSubstring("FeatureFlagSource shop/missing, which does not exist")))
	})

	t.Run("a ReplicaSet the cache has not seen yet resolves by the pod-template-hash naming", func(t *testing.T) {
		g := NewWithT(t)
		pod := podOwnedBy("ReplicaSet", "web-77c9d", map[string]string{"app": "web", "pod-template-hash": "77c9d"})
		got := patched(t, pod, newMutator(t, reader, &recordingEnsurer{}).Handle(ctx, request(t, admissionv1.Create, pod, false)))
		g.Expect(sidecarOf(got)).NotTo(BeNil())
	})

	t.Run("StatefulSet and DaemonSet pods", func(t *testing.T) {
		g := NewWithT(t)
		for _, kind := range []string{"StatefulSet", "DaemonSet"} {
			name := map[string]string{"StatefulSet": "db", "DaemonSet": "agent"}[kind]
			pod := podOwnedBy(kind, name, nil)
			got := patched(t, pod, newMutator(t, reader, &recordingEnsurer{}).Handle(ctx, request(t, admissionv1.Create, pod, false)))
			g.Expect(sidecarOf(got)).NotTo(BeNil(), kind)
		}
	})

	t.Run("UPDATE is never mutated", func(t *testing.T) {
		g := NewWithT(t)
		ens := &recordingEnsurer{}
		pod := podOwnedBy("StatefulSet", "db", nil)
		resp := newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Update, pod, false))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Patches).To(BeEmpty())
		g.Expect(ens.calls).To(BeEmpty())
	})

	t.Run("dry run: the same patch, nothing ensured", func(t *testing.T) {
		g := NewWithT(t)
		ens := &recordingEnsurer{}
		pod := podOwnedBy("StatefulSet", "db", nil)
		got := patched(t, pod, newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Create, pod, true)))
		g.Expect(sidecarOf(got)).NotTo(BeNil())
		g.Expect(got.Spec.Volumes).To(HaveLen(1))
		g.Expect(ens.calls).To(BeEmpty())
	})

	t.Run("a ConfigMap that cannot be made to exist is left out, not mounted dangling", func(t *testing.T) {
		g := NewWithT(t)
		ens := &recordingEnsurer{fail: errors.New("its flag set has no valid content yet")}
		pod := podOwnedBy("StatefulSet", "db", nil)
		resp := newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Create, pod, false))
		got := patched(t, pod, resp)
		g.Expect(got.Spec.Volumes).To(BeEmpty())
		g.Expect(sidecarOf(got)).To(BeNil(), "its only source is left out")
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationIncomplete, "shop/checkout"))
		g.Expect(got.Annotations).To(HaveKeyWithValue(restarts.AnnotationInjection, ""),
			"nothing injected: the healer reads it as incomplete all the same (TestHealer)")
		g.Expect(resp.Warnings).To(ContainElement(ContainSubstring("flag set shop/checkout left out of this pod")))
	})

	t.Run("a pod of a workload no source applies to gets its admission record only", func(t *testing.T) {
		reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(replicaSetMeta("shop", "plain-1", "plain")).Build()
		for _, tc := range []struct {
			name        string
			annotations map[string]string
			dryRun      bool
		}{
			{"no annotations", nil, false},
			{"annotations of its own", map[string]string{"team": "shop", "a/b~c": "d"}, false},
			{"dry run", nil, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := NewWithT(t)
				ens := &recordingEnsurer{}
				pod := podOwnedBy("ReplicaSet", "plain-1", nil)
				pod.Annotations = tc.annotations
				resp := newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Create, pod, tc.dryRun))
				g.Expect(resp.Allowed).To(BeTrue())
				got := patched(t, pod, resp)
				want := pod.DeepCopy()
				want.Annotations = map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject}
				for k, v := range tc.annotations {
					want.Annotations[k] = v
				}
				g.Expect(got).To(Equal(want), "the record that the webhook saw it, nothing else")
				g.Expect(ens.calls).To(BeEmpty())

				again := patched(t, got, newMutator(t, reader, ens).Handle(ctx, request(t, admissionv1.Create, got, tc.dryRun)))
				g.Expect(again).To(Equal(want), "admitted again (re-created from its own YAML): the same")
			})
		}
	})

	t.Run("a pod admitted with nothing to inject before its workload was targeted is injected like any other once it is", func(t *testing.T) {
		g := NewWithT(t)
		pod := podOwnedBy("ReplicaSet", "web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"})
		pod.Annotations = map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject}
		got := patched(t, pod, newMutator(t, reader, &recordingEnsurer{}).Handle(ctx, request(t, admissionv1.Create, pod, false)))
		g.Expect(sidecarOf(got)).NotTo(BeNil(), "the record never keeps the webhook from looking at a pod")
		g.Expect(got.Annotations).To(HaveKey(restarts.AnnotationInjection))
		g.Expect(got.Annotations).NotTo(HaveKey(restarts.AnnotationAdmitted), "what it got now is its record")
	})

	t.Run("an opted-in pod that is no workload's is told why it gets nothing", func(t *testing.T) {
		g := NewWithT(t)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Annotations: map[string]string{v1beta1.AnnotationEnabled: "true"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		resp := newMutator(t, reader, &recordingEnsurer{}).Handle(ctx, request(t, admissionv1.Create, pod, false))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Patches).To(BeEmpty())
		g.Expect(resp.Warnings).To(ConsistOf(ContainSubstring("flagplane injects nothing into this pod: the pod has no controller")))
	})

	t.Run("the webhook waits for the graph to know the workload's opt-in annotations", func(t *testing.T) {
		g := NewWithT(t)
		reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(replicaSetMeta("shop", "plain-1", "plain")).Build()
		m := newMutator(t, reader, &recordingEnsurer{})
		m.WorkloadWait = 5 * time.Second
		pod := podOwnedBy("ReplicaSet", "plain-1", nil)
		pod.Annotations = map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "annotated"}
		go func() {
			time.Sleep(100 * time.Millisecond) // the Deployment's update reaches the graph
			w, _ := m.Graph.Topology().Snapshot().Workload(topology.WorkloadKey(topology.KindDeployment, "shop", "plain"))
			w.PodAnnotations = pod.Annotations
			_, _ = m.Graph.Topology().UpsertWorkload(w)
		}()
		got := patched(t, pod, m.Handle(ctx, request(t, admissionv1.Create, pod, false)))
		g.Expect(sidecarOf(got)).NotTo(BeNil())
	})
}
