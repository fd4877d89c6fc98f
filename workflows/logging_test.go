package workflows_test

import (
	"testing"

	"k8s.io/klog/v2"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

func TestLogKey(t *testing.T) {
	flagSet := topology.FlagSetKey("shop", "checkout")
	for _, c := range []struct {
		key  topology.Key
		kind string
		ref  klog.ObjectRef
	}{
		{flagSet, "FeatureFlag", klog.KRef("shop", "checkout")},
		{topology.Key{Kind: topology.KindSource, Namespace: "shop", Name: "flags"}, "FeatureFlagSource", klog.KRef("shop", "flags")},
		{topology.FlagdKey("shop", "edge"), "Flagd", klog.KRef("shop", "edge")},
		{topology.Key{Kind: topology.KindDeployment, Namespace: "shop", Name: "web"}, "Deployment", klog.KRef("shop", "web")},
		{topology.Key{Kind: topology.OwnerKind("batch", "Job"), Namespace: "shop", Name: "nightly"}, "Job", klog.KRef("shop", "nightly")},
		{topology.Key{Kind: topology.OwnerKind("", "ReplicationController"), Namespace: "shop", Name: "old"}, "ReplicationController", klog.KRef("shop", "old")},
		// The generated ConfigMap, in the consuming namespace.
		{topology.ConfigMapKey(flagSet, "web"), "ConfigMap", klog.KRef("web", topology.ConfigMapName(flagSet))},
	} {
		kind, ref := workflows.LogKey(c.key)
		if kind != c.kind || ref != c.ref {
			t.Errorf("LogKey(%s) = %q, %v; want %q, %v", c.key, kind, ref, c.kind, c.ref)
		}
	}
}
