package webhooks

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
)

// Pods and ReplicaSets are read from the cache only: metadata of both.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

var replicaSetGVK = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// WorkloadResolver finds the workload a pod belongs to, from its controller
// reference and, for a ReplicaSet, the ReplicaSet's controller reference in
// the metadata cache the controllers keep. It makes no API request.
type WorkloadResolver struct {
	// Reader is the manager's cache.
	Reader client.Reader
}

// Resolution is the outcome of resolving a pod's workload.
type Resolution struct {
	// Workload is set when OK.
	Workload topology.Key
	OK       bool
	// Why says why not, for a warning to pods that asked for flags.
	Why string
}

// WorkloadOf resolves the workload of a pod in namespace (a pod being
// created may not carry its namespace yet).
func (r *WorkloadResolver) WorkloadOf(ctx context.Context, namespace string, pod metav1.Object) Resolution {
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return Resolution{Why: "the pod has no controller"}
	}
	if !isApps(owner.APIVersion) {
		return Resolution{Why: "the pod's controller is a " + owner.Kind}
	}
	switch owner.Kind {
	case string(topology.KindStatefulSet):
		return Resolution{Workload: topology.WorkloadKey(topology.KindStatefulSet, namespace, owner.Name), OK: true}
	case string(topology.KindDaemonSet):
		return Resolution{Workload: topology.WorkloadKey(topology.KindDaemonSet, namespace, owner.Name), OK: true}
	case "ReplicaSet":
		return r.deploymentOf(ctx, namespace, owner.Name, pod.GetLabels()[appsv1.DefaultDeploymentUniqueLabelKey])
	}
	return Resolution{Why: "the pod's controller is a " + owner.Kind}
}

// deploymentOf resolves a ReplicaSet to its Deployment. The ReplicaSet
// controller creates a pod moments after the Deployment controller created
// the ReplicaSet, so the cache may not have it yet: then the name decides,
// the way the Deployment controller names ReplicaSets
// ("<deployment>-<pod-template-hash>", the hash also on the pod).
func (r *WorkloadResolver) deploymentOf(ctx context.Context, namespace, rsName, templateHash string) Resolution {
	rs := &metav1.PartialObjectMetadata{}
	rs.SetGroupVersionKind(replicaSetGVK)
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: rsName}, rs); err == nil {
		owner := metav1.GetControllerOfNoCopy(rs)
		if owner == nil || owner.Kind != string(topology.KindDeployment) || !isApps(owner.APIVersion) {
			return Resolution{Why: "the pod's ReplicaSet is not a Deployment's"}
		}
		return Resolution{Workload: topology.WorkloadKey(topology.KindDeployment, namespace, owner.Name), OK: true}
	}
	if name, ok := strings.CutSuffix(rsName, "-"+templateHash); ok && templateHash != "" && name != "" {
		return Resolution{Workload: topology.WorkloadKey(topology.KindDeployment, namespace, name), OK: true}
	}
	return Resolution{Why: "the pod's ReplicaSet is not known"}
}

func isApps(apiVersion string) bool {
	return apiVersion == appsv1.SchemeGroupVersion.String()
}
