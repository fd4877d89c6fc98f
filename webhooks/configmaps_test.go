package webhooks

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// TestEnsureSaysWhyNothingWasWritten: a ConfigMap the ensurer cannot write
// is named with the reason: a flag set larger than a ConfigMap holds is
// not "without valid content", and the pod's warning says which it is.
func TestEnsureSaysWhyNothingWasWritten(t *testing.T) {
	g := NewWithT(t)
	graph := renderingGraph(t)
	if _, err := graph.topo.UpsertFlagSet(largeFlagSet("shop", "flags")); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	e := NewConfigMapEnsurer(c, c, c, workflows.DefaultSettings())
	cm := topology.ConfigMapKey(topology.FlagSetKey("shop", "flags"), "shop")
	err := e.Ensure(t.Context(), graph.Topology().Snapshot(), cm)
	g.Expect(err).To(MatchError(And(
		ContainSubstring("ConfigMap shop/flagd.shop.flags: flag set shop/flags is"),
		ContainSubstring("more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold"))))
	g.Expect(err.Error()).NotTo(ContainSubstring("no valid content"))
	g.Expect(e.Exists(t.Context(), cm)).To(BeFalse(), "nothing written")
}
