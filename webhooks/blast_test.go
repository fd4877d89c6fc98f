package webhooks

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/blast"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
)

var blastManifests = `
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags}
spec:
  flagSpec:
    flags:
      f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: web}
spec:
  sources: [{source: flags, provider: file}]
  selector: {matchLabels: {tier: web}}
  rolloutOnChange: true
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: api}
spec:
  sources: [{source: flags, provider: kubernetes}]
  targetRefs: [{group: apps, kind: Deployment, name: api}]
` + blastWorkload("web-1", "web") + blastWorkload("web-2", "web") + blastWorkload("api", "api")

func blastWorkload(name, tier string) string {
	return `
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: ` + name + `, labels: {tier: ` + tier + `}}
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: app, image: app}]}
`
}

func TestFlagSetBlastRadius(t *testing.T) {
	g := NewWithT(t)
	graph := newGraph(t, blastManifests)
	v := &FlagSetValidator{Graph: graph}
	ff, ok := graph.Topology().Snapshot().FlagSet(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	edited := ff.DeepCopy()
	edited.Spec.FlagSpec.Flags["f"] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "on"}
	resp := v.Handle(t.Context(), admissionOf(t, admissionv1.Update, edited, ff))
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Warnings).To(ContainElement(
		"flagplane: this flag set reaches 1 namespace, 3 workloads and 0 Flagds through 2 FeatureFlagSources (shop); its flagd processes read the new content without a restart"))

	// A third source serves the flag set from the sync server: its workload subscribes.
	proxy := `
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: proxy}
spec:
  sources: [{source: flags, provider: flagd-proxy}]
  targetRefs: [{group: apps, kind: Deployment, name: worker}]
` + blastWorkload("worker", "worker")
	withProxy := newGraph(t, blastManifests+"\n---"+proxy)
	resp = (&FlagSetValidator{Graph: withProxy}).Handle(t.Context(), admissionOf(t, admissionv1.Update, edited, ff))
	g.Expect(resp.Warnings).To(ContainElement(
		"flagplane: this flag set reaches 1 namespace, 4 workloads and 0 Flagds through 3 FeatureFlagSources (shop); " +
			"1 of them subscribes to it on the sync server (flagd-proxy), which pushes the edit to their streams; its flagd processes read the new content without a restart"))

	unused := edited.DeepCopy()
	unused.Name = "new-flags"
	resp = v.Handle(t.Context(), admissionOf(t, admissionv1.Create, unused, nil))
	g.Expect(resp.Warnings).To(ContainElement("flagplane: no FeatureFlagSource uses this flag set: it reaches no workload"))

	graph.built = false
	resp = v.Handle(t.Context(), admissionOf(t, admissionv1.Update, edited, ff))
	g.Expect(resp.Warnings).To(BeEmpty(), "no claim before the graph is built")
}

func TestSourceBlastRadius(t *testing.T) {
	g := NewWithT(t)
	graph := newGraph(t, blastManifests)
	v := &SourceValidator{Graph: graph, Injection: injection.DefaultOptions()}
	src, ok := graph.Topology().Snapshot().Source(topology.SourceKey("shop", "web"))
	g.Expect(ok).To(BeTrue())

	port := src.DeepCopy()
	port.Spec.Port = 9013
	resp := v.Handle(t.Context(), admissionOf(t, admissionv1.Update, port, src))
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Warnings).To(ContainElement(
		"flagplane: this source reaches 1 namespace, 2 workloads and 0 Flagds; 2 workloads get a different sidecar (their new pods), 2 of them restart now (rolloutOnChange)"))

	wider := src.DeepCopy()
	wider.Spec.Selector = nil
	wider.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web-1"}, {Group: "apps", Kind: "Deployment", Name: "api"}}
	wider.Spec.RolloutOnChange = ptr.To(false)
	resp = v.Handle(t.Context(), admissionOf(t, admissionv1.Update, wider, src))
	g.Expect(resp.Warnings).To(ContainElement(
		"flagplane: this source reaches 1 namespace, 2 workloads and 0 Flagds; 1 more than before, 1 fewer; 2 workloads get a different sidecar (their new pods), 1 of them restart now (rolloutOnChange)"),
		"api gains a second source; web-2 loses its sidecar and restarts, as the old source asked")

	same := src.DeepCopy()
	same.Annotations = map[string]string{"note": "x"}
	same.Spec.DebugLogging = ptr.To(false)
	resp = v.Handle(t.Context(), admissionOf(t, admissionv1.Update, same, src))
	g.Expect(resp.Warnings).To(ContainElement(HaveSuffix("; no workload's sidecar changes")))
}

// TestSourceBlastGroupsLikeOneByOne: computing each group of workloads with
// the same injection inputs once counts what computing every workload does.
func TestSourceBlastGroupsLikeOneByOne(t *testing.T) {
	g := NewWithT(t)
	v := newGraph(t, clusterManifests(1000)).topo.Snapshot()
	opts := injection.DefaultOptions()
	for _, name := range []string{"by-label", "by-ref"} {
		src, ok := v.Source(topology.SourceKey("ns3", name))
		g.Expect(ok).To(BeTrue())
		for _, edit := range []func(*v1beta1.FeatureFlagSource){
			func(s *v1beta1.FeatureFlagSource) { s.Spec.Port = 9013 },
			func(s *v1beta1.FeatureFlagSource) {
				s.Spec.RolloutOnChange = ptr.To(true)
				s.Spec.LogFormat = "console"
			},
			func(s *v1beta1.FeatureFlagSource) { s.Spec.DebugLogging = ptr.To(true) },
		} {
			edited := src.DeepCopy()
			edit(edited)
			after, err := v.WithSource(edited)
			g.Expect(err).NotTo(HaveOccurred())
			changed, restarts := 0, 0
			for _, w := range after.WorkloadsOfSource(topology.SourceKey("ns3", name)) {
				old, next := injection.Desired(v, w, opts), injection.Desired(after, w, opts)
				if old.Fingerprint() != next.Fingerprint() {
					changed++
					if next.RolloutOnChange(after) || old.RolloutOnChange(v) {
						restarts++
					}
				}
			}
			g.Expect(changed).To(BeNumerically(">", 0))
			r, err := blast.OfSource(v, edited, opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Summary()).To(HaveSuffix(fmt.Sprintf("%d workloads get a different sidecar (their new pods), %d of them restart now (rolloutOnChange)", changed, restarts)), name)
		}
	}
}

// TestFlagSetBlastRadiusValidatesOnce: the warning's what-if takes the
// admission's own validation, so the graph's renderer is not called again
// for the candidate (nor for the flag sets it holds already).
func TestFlagSetBlastRadiusValidatesOnce(t *testing.T) {
	g := NewWithT(t)
	val := flagsets.NewValidator(false)
	renders := 0
	topo := topology.New(topology.WithFlagSetRendering(func(ff *v1beta1.FeatureFlag) topology.Rendered {
		renders++
		return val.Rendering(ff)
	}))
	g.Expect(manifests.Load(topo, strings.NewReader(blastManifests))).To(Succeed())
	graph := &staticGraph{topo: topo, built: true}
	ff, ok := topo.Snapshot().FlagSet(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	edited := ff.DeepCopy()
	edited.Spec.FlagSpec.Flags["f"] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "on"}
	before := renders

	resp := (&FlagSetValidator{Graph: graph}).Handle(t.Context(), admissionOf(t, admissionv1.Update, edited, ff))
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Warnings).To(ContainElement(HavePrefix("flagplane: this flag set reaches 1 namespace, 3 workloads")))
	g.Expect(renders).To(Equal(before), "the what-if renders nothing: the admission validated the candidate")
}
