package flagds

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/rbac"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

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
func goldenFlagdOptions() Options {
	o := DefaultOptions()
	o.Image = "open-feature/flagd"
	o.Injection.SyncServer = "flagplane-sync.flagplane-system.svc:8015"
	o.Injection.SyncServerHeaders = func(ns string) (map[string]string, error) {
		return map[string]string{"authorization": "Bearer token-of-" + ns}, nil
	}
	return o
}

// TestFlagdGolden builds the graph from testdata/<case>.in.yaml and
// compares every Flagd's objects, RBAC and status (with every object in
// place and its Deployment reporting one ready replica) with <case>.out.yaml.
func TestFlagdGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
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
			outPath := filepath.Join("testdata", name+".out.yaml")
			if *update {
				g.Expect(os.WriteFile(outPath, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(outPath)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./workflows/flagds -run TestFlagdGolden -update")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}

func deriveFlagds(v *topology.View, opts Options) flagdGolden {
	out := flagdGolden{Warnings: map[string][]string{}, Status: map[string]v1beta1.FlagdStatus{}}
	for _, k := range v.Flagds() {
		objs := Desired(v, k, opts)
		children := Children{InPlace: map[string]bool{}}
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
		roles, bindings := rbac.Desired(v, k, workflows.DefaultSettings().Generated)
		out.Roles = append(out.Roles, roles...)
		out.RoleBindings = append(out.RoleBindings, bindings...)
		if len(objs.Warnings) > 0 {
			out.Warnings[k.String()] = objs.Warnings
		}
		f, _ := v.Flagd(k)
		st := DesiredStatus(f, objs, children)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = workflowstest.FixedTime
		}
		out.Status[k.String()] = st
	}
	return out
}
