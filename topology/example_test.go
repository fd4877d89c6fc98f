package topology_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

func flagSet(defaultVariant string) *v1beta1.FeatureFlag {
	return &v1beta1.FeatureFlag{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"},
		Spec: v1beta1.FeatureFlagSpec{FlagSpec: v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{
			"new-checkout": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: defaultVariant},
		}}},
	}
}

// A source that selects workloads by label and reads a flag set from a
// file: the flag set is rendered into a ConfigMap that the selected
// workloads mount. Each event returns what has to be recomputed.
func Example() {
	t := topology.New()

	d, _ := t.UpsertWorkload(topology.Workload{
		Kind: topology.KindDeployment, Namespace: "shop", Name: "web",
		Labels: map[string]string{"app": "web"},
	})
	fmt.Println("workload:", d) // no source applies to it yet

	d, _ = t.UpsertSource(&v1beta1.FeatureFlagSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sidecar"},
		Spec: v1beta1.FeatureFlagSourceSpec{
			Sources:  []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderFile}},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	})
	fmt.Println("source:", d) // its flag set does not exist yet: a pending edge

	d, _ = t.UpsertFlagSet(flagSet("off"))
	fmt.Println("flag set:", d)

	d, _ = t.UpsertFlagSet(flagSet("on"))
	fmt.Println("flag edit:", d)

	v := t.Snapshot()
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	for _, cm := range v.ConfigMapsOfWorkload(web) {
		fmt.Printf("%s mounts %s/%s\n", web, cm.Namespace, topology.ConfigMapName(cm.FlagSet()))
	}
	// Output:
	// workload: {}
	// source: {deployment:shop/web featureflagsource:shop/sidecar}
	// flag set: {configmap:shop/shop/flags deployment:shop/web featureflag:shop/flags featureflagsource:shop/sidecar}
	// flag edit: {configmap:shop/shop/flags featureflag:shop/flags}
	// deployment:shop/web mounts shop/flagd.shop.flags
}

// A workload lists its sources in its annotation; sources that target it
// themselves come after those, by key.
func ExampleView_SourcesOfWorkload() {
	t := topology.New()
	for _, name := range []string{"a", "b", "c"} {
		_, _ = t.UpsertSource(&v1beta1.FeatureFlagSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: v1beta1.FeatureFlagSourceSpec{
				TargetRefs: []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web"}},
			},
		})
	}
	_, _ = t.UpsertWorkload(topology.Workload{
		Kind: topology.KindDeployment, Namespace: "shop", Name: "web",
		PodAnnotations: map[string]string{
			v1beta1.AnnotationEnabled:           "true",
			v1beta1.AnnotationFeatureFlagSource: "c, a",
		},
	})
	fmt.Println(t.Snapshot().SourcesOfWorkload(topology.WorkloadKey(topology.KindDeployment, "shop", "web")))
	// Output:
	// [featureflagsource:shop/c featureflagsource:shop/a featureflagsource:shop/b]
}

// A reference to a flag set of another namespace resolves only when a grant
// there permits it; until then the source's status can name it.
func ExampleView_UnresolvedRefs() {
	t := topology.New()
	_, _ = t.UpsertSource(&v1beta1.FeatureFlagSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sidecar"},
		Spec:       v1beta1.FeatureFlagSourceSpec{Sources: []v1beta1.Source{{Source: "team/shared"}}},
	})
	src := topology.SourceKey("shop", "sidecar")
	fmt.Println(t.Snapshot().UnresolvedRefs(src))

	d, _ := t.UpsertGrant(topology.Grant{Namespace: "team", Name: "shop",
		From: []topology.GrantFrom{{Group: "core.openfeature.dev", Kind: "FeatureFlagSource", Namespace: "shop"}},
		To:   []topology.GrantTo{{Group: "core.openfeature.dev", Kind: "FeatureFlag"}}})
	fmt.Println(d, t.Snapshot().UnresolvedRefs(src))
	// Output:
	// [{featureflag:team/shared file 0 NotPermitted}]
	// {featureflagsource:shop/sidecar} [{featureflag:team/shared file 0 NotFound}]
}

// A View does not change while the topology goes on.
func ExampleTopology_Snapshot() {
	t := topology.New()
	_, _ = t.UpsertFlagSet(flagSet("on"))
	v := t.Snapshot()
	t.DeleteFlagSet("shop", "flags")
	fmt.Println(v.FlagSets(), t.Snapshot().FlagSets())
	// Output:
	// [featureflag:shop/flags] []
}

func ExampleConfigMapName() {
	fmt.Println(topology.ConfigMapName(topology.FlagSetKey("shop", "flags")))
	// Output:
	// flagd.shop.flags
}

// The DOT rendering depends only on the graph.
func ExampleView_DOT() {
	t := topology.New()
	_, _ = t.UpsertGrant(topology.Grant{Namespace: "team", Name: "shop",
		From: []topology.GrantFrom{{Group: "core.openfeature.dev", Kind: "FeatureFlagSource", Namespace: "shop"}},
		To:   []topology.GrantTo{{Group: "core.openfeature.dev", Kind: "FeatureFlag"}}})
	fmt.Print(string(t.DOT()))
	// Output:
	// digraph topology {
	//   rankdir=LR;
	//   node [fontname="Helvetica", fontsize=10];
	//   edge [fontname="Helvetica", fontsize=9];
	//   "referencegrant:team/shop" [label="ReferenceGrant\nteam/shop", shape=octagon];
	// }
}
