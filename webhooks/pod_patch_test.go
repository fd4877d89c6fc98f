package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/workflows/restarts"
)

// applyPatch applies a response's patch to the raw pod, as the API server
// does, and returns the result as a tree of values.
func applyPatch(t testing.TB, raw []byte, resp admission.Response) map[string]any {
	t.Helper()
	out := raw
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = p.Apply(raw); err != nil {
			t.Fatalf("the patch does not apply to the pod as sent: %v\npatch: %s", err, ops)
		}
	}
	var tree map[string]any
	if err := json.Unmarshal(out, &tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

// untouched is a pod as a tree of values without the fields the Pod
// webhook's patch may change (podPatch).
func untouched(tree map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range tree {
		out[k] = v
	}
	strip := func(key string, fields ...string) {
		m, ok := out[key].(map[string]any)
		if !ok {
			return
		}
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		for _, f := range fields {
			delete(c, f)
		}
		if key == "spec" {
			if cs, ok := c["containers"].([]any); ok {
				var kept []any
				for _, ci := range cs {
					if cm, ok := ci.(map[string]any); ok {
						cc := map[string]any{}
						for k, v := range cm {
							if k != "env" {
								cc[k] = v
							}
						}
						kept = append(kept, cc)
						continue
					}
					kept = append(kept, ci)
				}
				c["containers"] = kept
			}
		}
		out[key] = c
	}
	strip("metadata", "annotations")
	strip("spec", "volumes", "initContainers", "imagePullSecrets")
	return out
}

// A pod as an API server newer than this build sends it: fields that
// corev1.Pod does not have, on the pod, its spec and a container. The
// patch injects the sidecar and leaves them all as they were sent.
func TestPodPatchKeepsFieldsThisBuildDoesNotKnow(t *testing.T) {
	g := NewWithT(t)
	raw := []byte(`{"apiVersion":"v1","kind":"Pod",
	  "metadata":{"generateName":"web-5d4f8-","labels":{"app":"web","pod-template-hash":"5d4f8"},
	    "annotations":{"team":"shop"},
	    "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-5d4f8","uid":"u","controller":true}]},
	  "spec":{"containers":[{"name":"app","image":"app","env":[{"name":"A","value":"1"}],"futureContainerField":{"x":1}}],
	    "futureSpecField":["a","b"]},
	  "futureTopLevel":true}`)
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(replicaSetMeta("shop", "web-5d4f8", "web")).Build()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: "shop", DryRun: ptr.To(false),
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw},
	}}
	resp := newMutator(t, reader, &recordingEnsurer{}).Handle(context.Background(), req)
	g.Expect(resp.Allowed).To(BeTrue())
	got := applyPatch(t, raw, resp)

	var sent map[string]any
	g.Expect(json.Unmarshal(raw, &sent)).To(Succeed())
	g.Expect(untouched(got)).To(Equal(untouched(sent)), "every field the injection does not change is as sent")
	g.Expect(got).To(HaveKeyWithValue("futureTopLevel", true))
	spec := got["spec"].(map[string]any)
	g.Expect(spec).To(HaveKey("futureSpecField"))
	app := spec["containers"].([]any)[0].(map[string]any)
	g.Expect(app).To(HaveKey("futureContainerField"))
	g.Expect(app["env"]).To(ContainElement(map[string]any{"name": "A", "value": "1"}), "the container's own env stays, first")
	g.Expect(app["env"]).To(ContainElement(map[string]any{"name": "FLAGD_RESOLVER", "value": "rpc"}))
	g.Expect(spec["initContainers"]).To(HaveLen(1), "the sidecar")
	g.Expect(got["metadata"].(map[string]any)["annotations"]).To(And(HaveKeyWithValue("team", "shop"), HaveKey(restarts.AnnotationInjection)))
}

func TestPodPatch(t *testing.T) {
	env := func(names ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for _, n := range names {
			out = append(out, corev1.EnvVar{Name: n, Value: "v"})
		}
		return out
	}
	pod := func(annotations map[string]string, volumes []string, appEnv []corev1.EnvVar, image string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image, Env: appEnv}, {Name: "other", Image: "o"}}}}
		for _, v := range volumes {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v})
		}
		return p
	}
	ops := func(o ...[2]string) [][2]string { return o }
	for _, c := range []struct {
		name     string
		from, to *corev1.Pod
		want     [][2]string // operation, path
		rest     bool
	}{
		{name: "nothing changed", from: pod(nil, nil, nil, "a"), to: pod(nil, nil, nil, "a"), rest: true},
		{name: "annotations onto none, volumes onto none, env onto none",
			from: pod(nil, nil, nil, "a"), to: pod(map[string]string{"k": "v"}, []string{"flagd"}, env("X"), "a"),
			want: ops([2]string{"add", "/metadata/annotations"}, [2]string{"add", "/spec/volumes"}, [2]string{"add", "/spec/containers/0/env"}), rest: true},
		{name: "appended to what there was; a key set, one changed, one removed, escaped",
			from: pod(map[string]string{"a/b": "1", "c~d": "2", "gone": "3"}, []string{"data"}, env("A"), "a"),
			to:   pod(map[string]string{"a/b": "1", "c~d": "9", "new": "4"}, []string{"data", "flagd"}, env("A", "X", "Y"), "a"),
			want: ops([2]string{"add", "/metadata/annotations/c~0d"}, [2]string{"add", "/metadata/annotations/new"}, [2]string{"remove", "/metadata/annotations/gone"},
				[2]string{"add", "/spec/volumes/-"}, [2]string{"add", "/spec/containers/0/env/-"}, [2]string{"add", "/spec/containers/0/env/-"}), rest: true},
		{name: "a list changed in place is replaced whole",
			from: pod(nil, []string{"data"}, env("A"), "a"), to: pod(nil, []string{"other", "flagd"}, env("B"), "a"),
			want: ops([2]string{"add", "/spec/volumes"}, [2]string{"add", "/spec/containers/0/env"}), rest: true},
		{name: "a container changed elsewhere than its env is replaced",
			from: pod(nil, nil, nil, "a"), to: pod(nil, nil, nil, "b"),
			want: ops([2]string{"replace", "/spec/containers/0"}), rest: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, rest := podPatch(c.from, c.to)
			var paths [][2]string
			for _, op := range got {
				paths = append(paths, [2]string{op.Operation, op.Path})
			}
			g.Expect(paths).To(Equal(c.want))
			g.Expect(rest).To(Equal(c.rest))

			// Applied to the pod as encoded, the patch gives the mutated pod.
			raw, err := json.Marshal(c.from)
			g.Expect(err).NotTo(HaveOccurred())
			tree := applyPatch(t, raw, admission.Response{Patches: got})
			var want map[string]any
			rawTo, err := json.Marshal(c.to)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(rawTo, &want)).To(Succeed())
			g.Expect(tree).To(Equal(want))
		})
	}

	t.Run("a pod changed outside the injection's fields is not patched field by field", func(t *testing.T) {
		from, to := pod(nil, nil, nil, "a"), pod(nil, nil, nil, "a")
		to.Spec.NodeName = "n"
		if _, rest := podPatch(from, to); rest {
			t.Fatal("podPatch says the rest is the same")
		}
	})
}
