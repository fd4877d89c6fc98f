package node

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Addresses reaches the pods of a Node that may start after the manager:
// give its PodAddress to the manager (operator.Options.PodAddress), and
// Set the Node once it runs. A pod's container ports are ports of this
// host (Node.Addr), not of the pod's IP.
type Addresses struct {
	node atomic.Pointer[Node]
}

// Set makes the pods of n reachable.
func (a *Addresses) Set(n *Node) { a.node.Store(n) }

// PodAddress is host:port of a container's port of pod; false before Set,
// or when the pod does not run that container on the node.
func (a *Addresses) PodAddress(pod *corev1.Pod, container string, port int32) (string, bool) {
	n := a.node.Load()
	if n == nil {
		return "", false
	}
	return n.Addr(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, container, port)
}
