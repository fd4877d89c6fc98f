package workflows

import (
	"k8s.io/klog/v2"

	"github.com/flagplane/flagplane/topology"
)

// LogKey is how the logs name the object of a topology key, as
// controller-runtime names the object of a reconcile: one key, its kind as
// Kubernetes names it ("FeatureFlag", "FeatureFlagSource", "Flagd",
// "Deployment", "Job", ...), whose value is its namespace/name
// (klog.KRef: "shop/checkout" in text, {"name","namespace"} in JSON):
//
//	logger.WithValues(workflows.LogKey(key)).Info("...")
//
// A ConfigMap key names the generated ConfigMap (topology.ConfigMapName of
// its flag set, in its namespace); a workload of another owner kind than
// Deployment, StatefulSet or DaemonSet is named by its kind without the
// API group ("Job", not "Job.batch").
//
// Whoever hands a key to a workflow puts it into the logger of the
// workflow's context; a workflow adds, the same way, the other objects it
// logs about (the FeatureFlag of a ConfigMap, the Pod it restarts a
// workload for...).
func LogKey(k topology.Key) (string, klog.ObjectRef) {
	switch {
	case k.Kind == topology.KindConfigMap:
		return string(k.Kind), klog.KRef(k.Namespace, topology.ConfigMapName(k.FlagSet()))
	case k.Kind.IsPodOwner():
		_, kind := k.Kind.GroupKind()
		return kind, klog.KRef(k.Namespace, k.Name)
	}
	return string(k.Kind), klog.KRef(k.Namespace, k.Name)
}
