package restarts

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
)

// Pods, ReplicaSets and Jobs are read from the cache only: their metadata
// (and a pod's service account) is what resolving a pod's workload takes;
// Deployments too, when a ReplicaSet's name was cut.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch

var jobGVK = batchv1.SchemeGroupVersion.WithKind("Job")

// Owners finds the workload a pod belongs to, from its controller reference
// and, for a ReplicaSet or a Job, that one's controller, in the metadata
// caches the controllers keep. It makes no API request.
//
// A pod's workload is the top of its controller chain as far as two
// levels: a Deployment (pod → ReplicaSet → Deployment), a StatefulSet, a
// DaemonSet, a CronJob (pod → Job → CronJob), a bare ReplicaSet or Job, the
// owner of a ReplicaSet of another kind (an Argo Rollout: pod → ReplicaSet
// → Rollout), or whatever else controls the pod. A pod with no controller
// has no workload: flagplane injects into pods of workloads only, as the
// OpenFeature Operator refuses static and orphaned pods.
type Owners struct {
	// Reader is the manager's cache (ReplicaSet and Job metadata).
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
func (o Owners) WorkloadOf(ctx context.Context, namespace string, pod metav1.Object) Resolution {
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return Resolution{Why: "the pod has no controller (flagplane injects into pods of workloads only)"}
	}
	group := groupOf(owner.APIVersion)
	switch {
	case group == appsv1.GroupName && owner.Kind == "ReplicaSet":
		return o.replicaSetOwner(ctx, namespace, owner.Name, pod.GetLabels()[appsv1.DefaultDeploymentUniqueLabelKey])
	case group == batchv1.GroupName && owner.Kind == "Job":
		return o.jobOwner(ctx, namespace, owner.Name)
	}
	return resolvedOwner(group, owner.Kind, namespace, owner.Name)
}

// replicaSetOwner resolves a ReplicaSet to its controller. The ReplicaSet
// controller creates a pod moments after the Deployment controller created
// the ReplicaSet, so the cache may not have it yet: then the name decides,
// the way the Deployment controller names ReplicaSets
// ("<deployment>-<pod-template-hash>", the hash also on the pod).
func (o Owners) replicaSetOwner(ctx context.Context, namespace, rsName, templateHash string) Resolution {
	rs := &metav1.PartialObjectMetadata{}
	rs.SetGroupVersionKind(replicaSetGVK)
	if err := o.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: rsName}, rs); err == nil {
		if owner := metav1.GetControllerOfNoCopy(rs); owner != nil {
			return resolvedOwner(groupOf(owner.APIVersion), owner.Kind, namespace, owner.Name)
		}
		return resolved(topology.OwnerKind(appsv1.GroupName, "ReplicaSet"), namespace, rsName)
	}
	name, ok := strings.CutSuffix(rsName, "-"+templateHash)
	switch {
	case !ok || templateHash == "" || name == "":
	case len(rsName) < validation.DNS1123SubdomainMaxLength:
		return resolved(topology.KindDeployment, namespace, name)
	default:
		// The Deployment controller cuts a name too long for
		// "<name>-<hash>" to fit a ReplicaSet's 253 characters: the one
		// Deployment whose name starts so is the pod's.
		if d, ok := o.deploymentNamed(ctx, namespace, name); ok {
			return resolved(topology.KindDeployment, namespace, d)
		}
	}
	return Resolution{Why: "the pod's ReplicaSet is not known yet"}
}

// deploymentNamed finds the one Deployment of namespace whose name starts
// with prefix.
func (o Owners) deploymentNamed(ctx context.Context, namespace, prefix string) (string, bool) {
	var list appsv1.DeploymentList
	if err := o.Reader.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return "", false
	}
	var found []string
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, prefix) {
			found = append(found, list.Items[i].Name)
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// jobOwner resolves a Job to its CronJob, or to itself.
func (o Owners) jobOwner(ctx context.Context, namespace, jobName string) Resolution {
	job := &metav1.PartialObjectMetadata{}
	job.SetGroupVersionKind(jobGVK)
	if err := o.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: jobName}, job); err != nil {
		return Resolution{Why: "the pod's Job is not known yet"}
	}
	if owner := metav1.GetControllerOfNoCopy(job); owner != nil {
		return resolvedOwner(groupOf(owner.APIVersion), owner.Kind, namespace, owner.Name)
	}
	return resolved(topology.OwnerKind(batchv1.GroupName, "Job"), namespace, jobName)
}

// resolvedOwner resolves a controller reference to its workload, when it
// names an object an API can hold: a kind that is a DNS-1035 label in lower
// case (what a CustomResourceDefinition takes), a group that is a DNS
// subdomain, a name that is one. The API server checks no more of a
// reference than that it is not empty, and a workload's name goes into the
// names of its Roles (no "/", no "%"), read back at the colons
// (rbac.WorkloadOfName): a reference to nothing that could exist is no
// workload.
func resolvedOwner(group, kind, namespace, name string) Resolution {
	if len(validation.IsDNS1035Label(strings.ToLower(kind))) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 ||
		(group != "" && len(validation.IsDNS1123Subdomain(group)) > 0) {
		return Resolution{Why: fmt.Sprintf("the pod's controller reference (kind %q of group %q, name %q) names no object Kubernetes can hold", kind, group, name)}
	}
	return resolved(topology.OwnerKind(group, kind), namespace, name)
}

func resolved(kind topology.Kind, namespace, name string) Resolution {
	return Resolution{Workload: topology.WorkloadKey(kind, namespace, name), OK: true}
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}
