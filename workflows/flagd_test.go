package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// flagdGolden is everything the workflows derive for the Flagds of a case.
type flagdGolden struct {
	Objects      []any                          `json:"objects,omitempty"`
	ConfigMaps   []string                       `json:"configMaps,omitempty"`
	Roles        []*rbacv1.Role                 `json:"roles,omitempty"`
	RoleBindings []*rbacv1.RoleBinding          `json:"roleBindings,omitempty"`
	Warnings     map[string][]string            `json:"warnings,omitempty"`
	Status       map[string]v1beta1.FlagdStatus `json:"status,omitempty"`
}

// goldenFlagdOptions run a sync server, so that flagd-proxy entries are
// served, and name flagd's image without a registry.
func goldenFlagdOptions() FlagdOptions {
	o := DefaultFlagdOptions()
	o.Image = "open-feature/flagd"
	o.Injection.SyncServer = "flagplane-sync.flagplane-system.svc:8015"
	o.Injection.SyncServerHeaders = func(ns string) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer token-of-" + ns}, nil
	}
	return o
}

// TestFlagdGolden builds the graph from testdata/flagd/<case>.in.yaml and
// compares every Flagd's objects, RBAC and status (with every object in
// place and its Deployment reporting one ready replica) with <case>.out.yaml.
func TestFlagdGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "flagd", "*.in.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			f, err := os.Open(in)
			g.Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			topo := topology.New()
			g.Expect(manifests.Load(topo, f)).To(Succeed())
			got, err := yaml.Marshal(deriveFlagds(topo.Snapshot(), goldenFlagdOptions()))
			g.Expect(err).NotTo(HaveOccurred())
			outPath := filepath.Join("testdata", "flagd", name+".out.yaml")
			if *update {
				g.Expect(os.WriteFile(outPath, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(outPath)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./workflows -run TestFlagdGolden -update")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}

func deriveFlagds(v *topology.View, opts FlagdOptions) flagdGolden {
	out := flagdGolden{Warnings: map[string][]string{}, Status: map[string]v1beta1.FlagdStatus{}}
	for _, k := range v.Flagds() {
		objs := DesiredFlagd(v, k, opts)
		children := FlagdChildren{InPlace: map[string]bool{}}
		if objs.Deployment != nil {
			out.Objects = append(out.Objects, objs.Deployment, objs.Service)
			children.InPlace["Deployment"], children.InPlace["Service"] = true, true
			d := objs.Deployment.DeepCopy()
			d.Status.Replicas, d.Status.ReadyReplicas = 1, 1
			children.Deployment = d
		}
		if objs.Ingress != nil {
			out.Objects = append(out.Objects, objs.Ingress)
			children.InPlace["Ingress"] = true
		}
		if objs.HTTPRoute != nil {
			out.Objects = append(out.Objects, objs.HTTPRoute.Object)
			children.InPlace["HTTPRoute"] = true
		}
		for _, cm := range objs.ConfigMaps {
			out.ConfigMaps = append(out.ConfigMaps, cm.Namespace+"/"+topology.ConfigMapName(cm.FlagSet()))
		}
		roles, bindings := DesiredRBAC(v, k, testSettings.Generated)
		out.Roles = append(out.Roles, roles...)
		out.RoleBindings = append(out.RoleBindings, bindings...)
		if len(objs.Warnings) > 0 {
			out.Warnings[k.String()] = objs.Warnings
		}
		f, _ := v.Flagd(k)
		st := DesiredFlagdStatus(f, objs, children)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = fixedTime
		}
		out.Status[k.String()] = st
	}
	return out
}

func TestFieldsMismatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want any
		path      string
	}{
		{"equal", map[string]any{"a": int64(1)}, map[string]any{"a": 1}, ""},
		{"extra fields are others'", map[string]any{"a": "x", "b": "y"}, map[string]any{"a": "x"}, ""},
		{"missing", map[string]any{}, map[string]any{"a": "x"}, ".a"},
		{"other value", map[string]any{"a": map[string]any{"b": "x"}}, map[string]any{"a": map[string]any{"b": "y"}}, ".a.b"},
		{"list elements by index", map[string]any{"l": []any{map[string]any{"n": "a", "d": 1}}}, map[string]any{"l": []any{map[string]any{"n": "a"}}}, ""},
		{"list of another length", map[string]any{"l": []any{"a", "b"}}, map[string]any{"l": []any{"a"}}, ".l"},
		{"a scalar where a map is wanted", map[string]any{"a": "x"}, map[string]any{"a": map[string]any{}}, ".a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(FieldsMismatch(tc.got, tc.want)).To(Equal(tc.path))
		})
	}
}

func TestOwnsUndesiredFields(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	owned := `{"f:metadata":{"f:annotations":{"f:a":{},"f:b":{}}},"f:spec":{"f:tls":{},"f:rules":{}}}`
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a": "1", "b": "2"}}, "spec": map[string]any{"tls": []any{}, "rules": []any{}}}
	g := NewWithT(t)
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("flagplane", metav1.ManagedFieldsOperationApply, owned)}, want)).To(BeEmpty())
	delete(want["metadata"].(map[string]any)["annotations"].(map[string]any), "b")
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("flagplane", metav1.ManagedFieldsOperationApply, owned)}, want)).To(Equal(".metadata.annotations.b"))
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("kubectl", metav1.ManagedFieldsOperationApply, owned)}, want)).To(BeEmpty(), "another manager's fields are its own")
	delete(want["spec"].(map[string]any), "tls")
	want["metadata"].(map[string]any)["annotations"].(map[string]any)["b"] = "2"
	g.Expect(OwnsUndesiredFields([]metav1.ManagedFieldsEntry{entry("flagplane", metav1.ManagedFieldsOperationApply, owned)}, want)).To(Equal(".spec.tls"))
}
