package workflows

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// testSettings are the settings of an operator started without flags.
var testSettings = DefaultSettings()

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

// appliedObserved is a cluster in which every desired ConfigMap and RBAC
// object has been applied.
type appliedObserved struct{ v *topology.View }

func (o appliedObserved) ConfigMapData(namespace, name string) (map[string]string, bool) {
	key, ok := o.v.ConfigMapByName(namespace, name)
	if !ok {
		return nil, false
	}
	cm, err := DesiredConfigMap(o.v, key, testSettings)
	if err != nil || cm == nil {
		return nil, false
	}
	return cm.Data, true
}

func (appliedObserved) WriteFailure(string, string, string) string { return "" }

func (o appliedObserved) Role(namespace, name string) *rbacv1.Role {
	if w, ok := WorkloadOfRBACName(name); ok {
		roles, _ := DesiredRBAC(o.v, w, testSettings.Generated)
		for _, r := range roles {
			if r.Namespace == namespace {
				return r
			}
		}
	}
	return nil
}

func (o appliedObserved) RoleBinding(namespace, name string) *rbacv1.RoleBinding {
	if w, ok := WorkloadOfRBACName(name); ok {
		_, bindings := DesiredRBAC(o.v, w, testSettings.Generated)
		for _, b := range bindings {
			if b.Namespace == namespace {
				return b
			}
		}
	}
	return nil
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
			topo := topology.New()
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
		cm, err := DesiredConfigMap(v, k, testSettings)
		if err != nil {
			out.Invalid = append(out.Invalid, err.Error())
			continue
		}
		out.ConfigMaps = append(out.ConfigMaps, cm)
	}
	for _, w := range v.Workloads() {
		roles, bindings := DesiredRBAC(v, w, testSettings.Generated)
		out.Roles = append(out.Roles, roles...)
		out.RoleBindings = append(out.RoleBindings, bindings...)
		if fp, rollout := injection.Fingerprint(v, w, testSettings.Injection); fp != "" {
			out.RolloutTriggered[w.String()] = rollout
		}
		if warnings := AnnotationWarnings(v, w); len(warnings) > 0 {
			out.WorkloadWarnings[w.String()] = warnings
		}
	}
	for _, k := range v.FlagSets() {
		ff, _ := v.FlagSet(k)
		out.FlagSetStatus[k.String()] = zeroTimes(DesiredFlagSetStatus(v, ff, testSettings.FlagSets, appliedObserved{v}))
	}
	for _, k := range v.Sources() {
		s, _ := v.Source(k)
		st := DesiredSourceStatus(v, s, appliedObserved{v}, testSettings)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = fixedTime
		}
		out.SourceStatus[k.String()] = st
	}
	for _, k := range v.InProcessConfigs() {
		c, _ := v.InProcessConfig(k)
		st := DesiredInProcessConfigStatus(v, c)
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = fixedTime
		}
		out.InProcessStatus[k.String()] = st
	}
	return out
}

var fixedTime = metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func zeroTimes(st v1beta1.FeatureFlagStatus) v1beta1.FeatureFlagStatus {
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = fixedTime
	}
	for i := range st.Consumers {
		if st.Consumers[i].Since != nil {
			st.Consumers[i].Since = &fixedTime
		}
	}
	return st
}
