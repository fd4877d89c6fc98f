package rbac

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// TestGeneratedMetadata: the operator's --labels and --annotations go on
// every generated Role and RoleBinding, besides flagplane's own label, and
// a Role without them is not up to date.
func TestGeneratedMetadata(t *testing.T) {
	g := NewWithT(t)
	gen := workflows.GeneratedMetadata{Labels: map[string]string{"team": "platform"}, Annotations: map[string]string{"backup.example.com/skip": "true"}}

	topo := topology.New()
	g.Expect(manifests.Load(topo, strings.NewReader(`
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags"},"spec":{"flagSpec":{"flags":{}}}}
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"src"},"spec":{"sources":[{"source":"flags"},{"source":"flags","provider":"kubernetes"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"web"}]}}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}
`))).To(Succeed())
	v := topo.Snapshot()
	roles, bindings := Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "web"), gen)
	g.Expect(roles).To(HaveLen(1))
	for _, m := range []map[string]string{roles[0].Labels, bindings[0].Labels} {
		g.Expect(m).To(HaveKeyWithValue("team", "platform"))
		g.Expect(m).To(HaveKeyWithValue(v1beta1.LabelManagedBy, v1beta1.ManagedByValue))
	}
	g.Expect(roles[0].Annotations).To(HaveKeyWithValue("backup.example.com/skip", "true"))

	staleRole := roles[0].DeepCopy()
	delete(staleRole.Labels, "team")
	g.Expect(RoleUpToDate(staleRole, roles[0])).To(BeFalse())
	g.Expect(RoleUpToDate(roles[0].DeepCopy(), roles[0])).To(BeTrue())

	// Under another --managed-by, what was made under flagplane's is
	// relabelled.
	gen.ManagedBy = "open-feature-operator"
	roles2, bindings2 := Desired(v, topology.WorkloadKey(topology.KindDeployment, "shop", "web"), gen)
	g.Expect(roles2[0].Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, "open-feature-operator"))
	g.Expect(RoleUpToDate(roles[0], roles2[0])).To(BeFalse())
	g.Expect(RoleBindingUpToDate(bindings[0], bindings2[0])).To(BeFalse())
	g.Expect(RoleBindingUpToDate(bindings2[0].DeepCopy(), bindings2[0])).To(BeTrue())
}
