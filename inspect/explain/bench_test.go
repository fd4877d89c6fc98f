package explain_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// benchManifests is 10,000 Deployments in 100 namespaces with 10 flag
// sets each (1,000): per namespace a source selecting a third of the
// Deployments by label and one naming a tenth by targetRefs that delivers
// every flag set of the namespace.
func benchManifests() string {
	var b strings.Builder
	for ns := range 100 {
		var entries []string
		for f := range 10 {
			fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlag\nmetadata: {namespace: ns%d, name: flags%d}\n"+
				"spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {\"on\": true, \"off\": false}, defaultVariant: \"off\"}}}}\n", ns, f)
			entries = append(entries, fmt.Sprintf("{source: flags%d}", f))
		}
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlagSource\nmetadata: {namespace: ns%d, name: by-label}\n"+
			"spec: {sources: [{source: flags0}], selector: {matchLabels: {flags: \"yes\"}}}\n", ns)
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlagSource\nmetadata: {namespace: ns%d, name: by-ref}\n"+
			"spec:\n  sources: [%s]\n  targetRefs:\n", ns, strings.Join(entries, ", "))
		for d := 0; d < 100; d += 10 {
			fmt.Fprintf(&b, "  - {group: apps, kind: Deployment, name: d%d}\n", d)
		}
		for d := range 100 {
			labels := "{}"
			if d%3 == 0 {
				labels = `{flags: "yes"}`
			}
			fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {namespace: ns%d, name: d%d, labels: %s}\n"+
				"spec: {selector: {matchLabels: {app: d%d}}, template: {metadata: {labels: {app: d%d}}, spec: {containers: [{name: app, image: app}]}}}\n",
				ns, d, labels, d, d)
		}
	}
	return b.String()
}

// BenchmarkExplain is `flagplane explain` over a graph of 10,000 workloads
// and 1,000 flag sets: a workload two sources target, a flag set, and a
// source, reporting p50 and p99 per answer.
func BenchmarkExplain(b *testing.B) {
	top := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	if err := manifests.Load(top, strings.NewReader(benchManifests())); err != nil {
		b.Fatal(err)
	}
	v := top.Snapshot()
	for _, c := range []struct{ name, kind, ns, obj string }{
		{"workload", "deployment", "ns0", "d0"},
		{"flagset", "featureflag", "ns0", "flags0"},
		{"source", "featureflagsource", "ns0", "by-label"},
	} {
		b.Run(c.name, func(b *testing.B) {
			runtime.GC() // the garbage of parsing the manifests is not explain's
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := explain.Explain(v, c.kind, c.ns, c.obj, injection.DefaultOptions()); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
