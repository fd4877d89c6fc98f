package topology

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// kindInfo is what the topology knows of a kind of node beyond its own
// file: its API type, and how DOT draws it.
type kindInfo struct {
	kind Kind
	// gvk is the API type of the kind's objects (Key.GroupVersionKind).
	gvk schema.GroupVersionKind
	// style is how a node of the kind is drawn: sources and configurations
	// as notes, as policy-machinery draws policies; workloads as filled
	// boxes, as it draws targetables.
	style string
}

// nodeKinds registers every kind of node, once, in the order of Counts and
// of DOT sections. A kind not in it is an owner of pods (Kind.IsPodOwner),
// counted as KindPodOwners.
var nodeKinds = [...]kindInfo{
	{KindFlagSet, v1beta1.GroupVersion.WithKind(string(KindFlagSet)), `shape=folder`},
	{KindSource, v1beta1.GroupVersion.WithKind(string(KindSource)), `shape=note`},
	{KindInProcessConfig, v1beta1.GroupVersion.WithKind(string(KindInProcessConfig)), `shape=note, style=dashed`},
	{KindDeployment, appsv1.SchemeGroupVersion.WithKind(string(KindDeployment)), `shape=box, style=filled, fillcolor="#e5e5e5"`},
	{KindStatefulSet, appsv1.SchemeGroupVersion.WithKind(string(KindStatefulSet)), `shape=box, style=filled, fillcolor="#e5e5e5"`},
	{KindDaemonSet, appsv1.SchemeGroupVersion.WithKind(string(KindDaemonSet)), `shape=box, style=filled, fillcolor="#e5e5e5"`},
	// Every other owner of pods: its API type is in its kind (OwnerKind).
	{kind: KindPodOwners},
	{KindConfigMap, corev1.SchemeGroupVersion.WithKind(string(KindConfigMap)), `shape=component`},
	// flagplane reads Gateway API ReferenceGrants (from FeatureFlagSource to FeatureFlag).
	{KindGrant, schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1beta1", Kind: string(KindGrant)}, `shape=octagon`},
	{KindFlagd, v1beta1.GroupVersion.WithKind(string(KindFlagd)), `shape=box3d, style=filled, fillcolor="#d9ead3"`},
	{KindSourcePolicy, policyv1alpha1.GroupVersion.WithKind(string(KindSourcePolicy)), `shape=note, style=filled, fillcolor="#fde9c9"`},
	{KindRolloutPolicy, deliveryv1alpha1.GroupVersion.WithKind(string(KindRolloutPolicy)), `shape=note, style=filled, fillcolor="#dbe8f8"`},
}

// kindIndex numbers the kinds for per-kind tables (nodeKinds); every other
// owner of pods counts as KindPodOwners; -1 for "".
func kindIndex(k Kind) int {
	if k == "" {
		return -1
	}
	for i := range nodeKinds {
		if nodeKinds[i].kind == k {
			return i
		}
	}
	return podOwnersIndex
}

// podOwnersIndex is KindPodOwners' place in nodeKinds.
var podOwnersIndex = func() int {
	for i := range nodeKinds {
		if nodeKinds[i].kind == KindPodOwners {
			return i
		}
	}
	panic("topology: KindPodOwners is not in nodeKinds")
}()

// registered tells whether k is a kind of nodeKinds (not KindPodOwners,
// which stands for the kinds that are not).
func registered(k Kind) bool {
	for i := range nodeKinds {
		if nodeKinds[i].kind == k {
			return k != KindPodOwners
		}
	}
	return false
}
