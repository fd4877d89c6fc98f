package status

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
)

// statusBenchView is one source with the file provider, selecting n
// Deployments of its namespace by label, and its flag set.
func statusBenchView(b *testing.B, n int) (*topology.View, *v1beta1.FeatureFlagSource) {
	b.Helper()
	top := topology.New(workflows.DefaultSettings().FlagSets.TopologyOptions()...)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "flags", Generation: 1}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"f": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"},
	}
	src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "src", Generation: 1}}
	src.Spec.Sources = []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderFile}}
	src.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, err := range []error{second(top.UpsertFlagSet(ff)), second(top.UpsertSource(src))} {
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		if _, err := top.UpsertWorkload(topology.Workload{Kind: topology.KindDeployment, Namespace: "ns",
			Name: fmt.Sprintf("w%05d", i), Labels: map[string]string{"app": "web"}}); err != nil {
			b.Fatal(err)
		}
	}
	v := top.Snapshot()
	if got := len(v.WorkloadsOfSource(topology.SourceKey("ns", "src"))); got != n {
		b.Fatalf("the source targets %d workloads, want %d", got, n)
	}
	return v, src
}

func second[T any](_ T, err error) error { return err }

// BenchmarkDesiredSourceStatus is the status of a source against the
// number of workloads it targets: what a change of its targets, its spec
// or its ConfigMaps' state costs. A flag-set edit no longer computes it
// (controllers' BenchmarkFlagSetEditStatus).
func BenchmarkDesiredSourceStatus(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			v, src := statusBenchView(b, n)
			s := workflows.DefaultSettings()
			obs := workflowstest.Applied{View: v, Settings: s}
			b.ReportAllocs()
			for b.Loop() {
				DesiredSource(v, src, obs, s)
			}
		})
	}
}
