package status

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// TestSidecarRefused: two sources whose kubernetes entries fit flagd's
// --sources argument one by one, and not together on the workload they
// both target, are each Programmed False with SidecarRefused (Stalled:
// only a user can fix it), naming the workload and the limit; with one of
// them alone, the other is Programmed.
func TestSidecarRefused(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	name := func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("f", 250) }
	for i := range 500 {
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlag\nmetadata: {namespace: shop, name: %s}\nspec: {flagSpec: {flags: {}}}\n", name(i))
	}
	for s := range 2 {
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlagSource\nmetadata: {namespace: shop, name: half-%d, generation: 1}\n"+
			"spec:\n  targetRefs: [{group: apps, kind: Deployment, name: web}]\n  sources:\n", s)
		for i := s * 250; i < s*250+250; i++ {
			fmt.Fprintf(&b, "  - {source: %s, provider: kubernetes}\n", name(i))
		}
	}
	b.WriteString(`---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
`)
	topo := topology.New()
	g.Expect(manifests.Load(topo, strings.NewReader(b.String()))).To(Succeed())
	settings := workflows.DefaultSettings()
	programmed := func(source string) (*v1beta1.FeatureFlagSourceStatus, string) {
		v := topo.Snapshot()
		src, ok := v.Source(topology.SourceKey("shop", source))
		g.Expect(ok).To(BeTrue())
		st := DesiredSource(v, src, workflowstest.Applied{View: v, Settings: settings}, settings)
		c := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionProgrammed)
		g.Expect(c).NotTo(BeNil())
		return &st, c.Reason + ": " + c.Message
	}
	for _, s := range []string{"half-0", "half-1"} {
		st, msg := programmed(s)
		g.Expect(msg).To(And(HavePrefix("SidecarRefused: 1 workload(s) get no flagd sidecar (Deployment shop/web): flagd sidecar not injected: flagd's --sources argument would be"),
			ContainSubstring("over the 131071 bytes of MAX_ARG_STRLEN"), ContainSubstring("500 flag sources from 2 FeatureFlagSource(s)")))
		g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionStalled)).To(BeTrue())
	}

	topo.DeleteSource("shop", "half-1")
	_, msg := programmed("half-0")
	g.Expect(msg).To(Equal("Programmed: 1 workload(s) programmed"))
}
