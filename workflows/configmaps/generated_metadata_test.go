package configmaps

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// TestGeneratedMetadata: the operator's --labels and --annotations go on
// every generated ConfigMap, besides flagplane's own label, and a ConfigMap
// without them is not up to date. (The Roles and RoleBindings: package
// rbac's TestGeneratedMetadata.)
func TestGeneratedMetadata(t *testing.T) {
	g := NewWithT(t)
	s := workflows.DefaultSettings()
	s.Generated = workflows.GeneratedMetadata{Labels: map[string]string{"team": "platform"}, Annotations: map[string]string{"backup.example.com/skip": "true"}}

	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	g.Expect(manifests.Load(topo, strings.NewReader(`
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags"},"spec":{"flagSpec":{"flags":{}}}}
{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"src"},"spec":{"sources":[{"source":"flags"},{"source":"flags","provider":"kubernetes"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"web"}]}}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}
`))).To(Succeed())
	v := topo.Snapshot()
	cm, err := Desired(v, topology.ConfigMapKey(topology.FlagSetKey("shop", "flags"), "shop"), s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Labels).To(Equal(map[string]string{"team": "platform", v1beta1.LabelManagedBy: v1beta1.ManagedByValue}))
	g.Expect(cm.Annotations).To(Equal(map[string]string{"backup.example.com/skip": "true"}))

	stale := cm.DeepCopy()
	delete(stale.Annotations, "backup.example.com/skip")
	g.Expect(upToDate(stale, cm)).To(BeFalse(), "an annotation missing: rewritten")
	g.Expect(upToDate(cm.DeepCopy(), cm)).To(BeTrue())
}
