package workflows_test

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
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/status"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// testSettings are the settings of an operator started without flags.
var testSettings = workflows.DefaultSettings()

// goldenOutput is everything the workflows derive from a set of objects.
type goldenOutput struct {
	ConfigMaps       []any                                           `json:"configMaps,omitempty"`
	Invalid          []string                                        `json:"invalid,omitempty"`
	Roles            []*rbacv1.Role                                  `json:"roles,omitempty"`
	RoleBindings     []*rbacv1.RoleBinding                           `json:"roleBindings,omitempty"`
	FlagSetStatus    map[string]v1beta1.FeatureFlagStatus            `json:"flagSetStatus,omitempty"`
	SourceStatus     map[string]v1beta1.FeatureFlagSourceStatus      `json:"sourceStatus,omitempty"`
	InProcessStatus  map[string]v1beta1.InProcessConfigurationStatus `json:"inProcessStatus,omitempty"`
	RolloutTriggered map[string]bool                                 `json:"rolloutOnChange,omitempty"`
	WorkloadWarnings map[string][]string                             `json:"workloadWarnings,omitempty"`
}

// TestGolden builds the graph from testdata/golden/<case>.in.yaml and
// compares everything the workflows derive with <case>.out.yaml.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.in.yaml"))
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
			topo := topology.New(testSettings.FlagSets.TopologyOptions()...)
			g.Expect(manifests.Load(topo, f)).To(Succeed())
			got, err := yaml.Marshal(derive(t, topo.Snapshot()))
			g.Expect(err).NotTo(HaveOccurred())

			outPath := filepath.Join("testdata", "golden", name+".out.yaml")
			if *update {
				g.Expect(os.WriteFile(outPath, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(outPath)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./workflows -run TestGolden -update")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}

func derive(t *testing.T, v *topology.View) goldenOutput {
	out := goldenOutput{
		FlagSetStatus:    map[string]v1beta1.FeatureFlagStatus{},
		SourceStatus:     map[string]v1beta1.FeatureFlagSourceStatus{},
		InProcessStatus:  map[string]v1beta1.InProcessConfigurationStatus{},
		RolloutTriggered: map[string]bool{},
		WorkloadWarnings: map[string][]string{},
	}
	for _, k := range v.ConfigMaps() {
		cm, err := configmaps.Desired(v, k, testSettings)
		if err != nil {
			out.Invalid = append(out.Invalid, err.Error())
			continue
		}
		out.ConfigMaps = append(out.ConfigMaps, cm)
	}
	for _, w := range v.Workloads() {
		roles, bindings := rbac.Desired(v, w, testSettings.Generated)
		out.Roles = append(out.Roles, roles...)
		out.RoleBindings = append(out.RoleBindings, bindings...)
		if fp, rollout := injection.Fingerprint(v, w, testSettings.Injection); fp != "" {
			out.RolloutTriggered[w.String()] = rollout
		}
		if warnings := status.AnnotationWarnings(v, w); len(warnings) > 0 {
			out.WorkloadWarnings[w.String()] = warnings
		}
	}
	for _, k := range v.FlagSets() {
		ff, _ := v.FlagSet(k)
		out.FlagSetStatus[k.String()] = zeroTimes(status.DesiredFlagSet(v, ff, workflowstest.Applied{View: v, Settings: testSettings}))
	}
	for _, k := range v.Sources() {
		s, _ := v.Source(k)
		st := status.DesiredSource(v, s, workflowstest.Applied{View: v, Settings: testSettings}, testSettings)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = workflowstest.FixedTime
		}
		out.SourceStatus[k.String()] = st
	}
	for _, k := range v.InProcessConfigs() {
		c, _ := v.InProcessConfig(k)
		st := status.DesiredInProcessConfig(v, c)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = workflowstest.FixedTime
		}
		out.InProcessStatus[k.String()] = st
	}
	return out
}

func zeroTimes(st v1beta1.FeatureFlagStatus) v1beta1.FeatureFlagStatus {
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = workflowstest.FixedTime
	}
	for i := range st.Consumers {
		if st.Consumers[i].Since != nil {
			st.Consumers[i].Since = &workflowstest.FixedTime
		}
	}
	return st
}
