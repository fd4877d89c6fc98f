package staging

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/manifests"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenObservation is the document of an input that says what the
// cluster shows (kind Observation): the rest are the objects.
type goldenObservation struct {
	Kind string    `json:"kind"`
	Now  time.Time `json:"now"`
	// Serving is what each consumer namespace holds; Delivered, when
	// true, says that every consumer holds what the plan gives it.
	Serving         map[string]string `json:"serving,omitempty"`
	Delivered       bool              `json:"delivered,omitempty"`
	GateFailure     string            `json:"gateFailure,omitempty"`
	GateUnknown     string            `json:"gateUnknown,omitempty"`
	PrometheusGates bool              `json:"prometheusGates,omitempty"`
}

// goldenPlan is a plan as the golden files show it.
type goldenPlan struct {
	Stable    string           `json:"stable"`
	Target    string           `json:"target"`
	Phase     string           `json:"phase"`
	Step      int              `json:"step"`
	Rollout   int64            `json:"rollout"`
	NewPlan   bool             `json:"newPlan,omitempty"`
	Replaced  string           `json:"replaced,omitempty"`
	Halt      string           `json:"halt,omitempty"`
	Problem   string           `json:"problem,omitempty"`
	Consumers []goldenConsumer `json:"consumers"`
	Unstaged  []string         `json:"unstaged,omitempty"`
}

type goldenConsumer struct {
	Namespace string `json:"namespace"`
	Step      int    `json:"step"`
	Revision  string `json:"revision"`
	Served    string `json:"served"`
}

type goldenOutput struct {
	Plan         goldenPlan                                      `json:"plan"`
	Status       deliveryv1alpha1.FeatureFlagRolloutPolicyStatus `json:"status"`
	RequeueAfter string                                          `json:"requeueAfter,omitempty"`
	Events       []Event                                         `json:"events,omitempty"`
}

// TestGolden: objects (testdata/golden/<case>.in.yaml) → the graph's plan
// for flags/checkout and the next step of its rollout policy
// (<case>.out.yaml). In the input, {{rev "green"}} is the revision of
// flags/checkout when its banner flag's default variant is green.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.in.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := yaml.Marshal(golden(t, in))
			g.Expect(err).NotTo(HaveOccurred())
			outPath := filepath.Join("testdata", "golden", name+".out.yaml")
			if *update {
				g.Expect(os.WriteFile(outPath, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(outPath)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./workflows/staging -run TestGolden -update")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}

func golden(t *testing.T, path string) goldenOutput {
	g := NewWithT(t)
	cluster, err := os.ReadFile(filepath.Join("testdata", "golden", "cluster.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	raw = append(append(cluster, "\n---\n"...), raw...)
	topo := topology.New(settings.FlagSets.TopologyOptions()...)
	tmpl, err := template.New(path).Funcs(template.FuncMap{
		"rev": func(variant string) string { return topo.Snapshot().RenderFlagSet(flagSet(variant)).Revision },
	}).Parse(string(raw))
	g.Expect(err).NotTo(HaveOccurred())
	var expanded bytes.Buffer
	g.Expect(tmpl.Execute(&expanded, nil)).To(Succeed())

	var obs goldenObservation
	var objects []string
	for _, doc := range strings.Split(expanded.String(), "\n---\n") {
		var probe struct {
			Kind string `json:"kind"`
		}
		g.Expect(yaml.Unmarshal([]byte(doc), &probe)).To(Succeed())
		if probe.Kind == "Observation" {
			g.Expect(yaml.UnmarshalStrict([]byte(doc), &obs)).To(Succeed())
			continue
		}
		objects = append(objects, doc)
	}
	g.Expect(manifests.Load(topo, strings.NewReader(strings.Join(objects, "\n---\n")))).To(Succeed())
	var policy *deliveryv1alpha1.FeatureFlagRolloutPolicy
	for _, doc := range objects {
		p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
		if yaml.Unmarshal([]byte(doc), p) == nil && p.Kind == deliveryv1alpha1.FeatureFlagRolloutPolicyKind {
			policy = p
		}
	}
	g.Expect(policy).NotTo(BeNil(), "the input has no FeatureFlagRolloutPolicy")

	v := topo.Snapshot()
	f := topology.FlagSetKey("flags", "checkout")
	plan := v.RolloutPlan(f)
	out := goldenOutput{Plan: goldenPlan{Stable: plan.Stable, Target: plan.Target, Phase: string(plan.Phase), Step: plan.Step,
		Rollout: plan.Rollout, NewPlan: plan.NewPlan, Replaced: plan.Replaced, Halt: plan.Halt, Problem: plan.Problem}}
	serving := obs.Serving
	if obs.Delivered {
		serving = map[string]string{}
	}
	for _, c := range plan.Consumers {
		s, _ := v.ServedFor(f, c.Namespace)
		served := s.Revision
		if s.Held {
			served = "held: " + s.Revision
		}
		out.Plan.Consumers = append(out.Plan.Consumers, goldenConsumer{Namespace: c.Namespace, Step: c.Step, Revision: c.Revision, Served: served})
		if obs.Delivered {
			serving[c.Namespace] = s.Revision
		}
	}
	for _, k := range plan.Unstaged {
		out.Plan.Unstaged = append(out.Plan.Unstaged, k.String())
	}
	res := Next(policy, plan, Observation{Now: obs.Now, Serving: serving, GateFailure: obs.GateFailure, GateUnknown: obs.GateUnknown,
		PrometheusGates: obs.PrometheusGates})
	for i := range res.Status.Conditions {
		res.Status.Conditions[i].LastTransitionTime = metav1.Time{} // the clock's, not the machine's
	}
	out.Status, out.Events = res.Status, res.Events
	if res.RequeueAfter > 0 {
		out.RequeueAfter = res.RequeueAfter.String()
	}
	return out
}
