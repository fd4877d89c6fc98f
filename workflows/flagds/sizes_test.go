package flagds

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// A Flagd whose source reads a flag set larger than a ConfigMap holds with
// the file provider says so in its own status: Programmed False with
// FlagSetTooLarge (the flag set, its size, the limit), which is Stalled;
// its objects stay in place, and its pods keep the content that fitted.
func TestFlagdOfAFlagSetTooLarge(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	g.Expect(manifests.Load(topo, strings.NewReader(`
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: flags, namespace: shop}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: shop, namespace: shop}
spec: {sources: [{source: flags, provider: file}]}
---
apiVersion: core.openfeature.dev/v1beta1
kind: Flagd
metadata: {name: flags, namespace: shop}
spec: {featureFlagSource: shop}
`))).To(Succeed())
	key := topology.FlagdKey("shop", "flags")
	judge := func() (*Objects, v1beta1.FlagdStatus) {
		v := topo.Snapshot()
		objs := Desired(v, key, DefaultOptions())
		children := Children{InPlace: map[string]bool{"Deployment": true, "Service": true}}
		f, _ := v.Flagd(key)
		return objs, DesiredStatus(f, objs, children)
	}
	objs, st := judge()
	g.Expect(objs.TooLarge).To(BeEmpty())
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue())

	large := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}}
	large.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	for i := range 2500 {
		large.Spec.FlagSpec.Flags[fmt.Sprintf("flag-%05d", i)] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, DefaultVariant: "off",
			Variants: []byte(`{"on":true,"off":false}`), Metadata: []byte(`{"description":"` + strings.Repeat("d", 400) + `"}`)}
	}
	_, err := topo.UpsertFlagSet(large)
	g.Expect(err).NotTo(HaveOccurred())
	objs, st = judge()
	g.Expect(objs.Deployment).NotTo(BeNil(), "its objects stay: the pods keep what fitted")
	g.Expect(objs.TooLarge).To(ConsistOf(HavePrefix("flag set shop/flags is ")))
	programmed := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionProgrammed)
	g.Expect(programmed.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonFlagSetTooLarge))
	g.Expect(programmed.Message).To(ContainSubstring("more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold"))
	g.Expect(flagdVerdict(st, Children{}).Health).To(Equal(workflows.Stalled))
}
