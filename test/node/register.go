package node

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The node's identity. Like a kubelet, the agent is user system:node:<name>
// in group system:nodes, with the bootstrap ClusterRole system:node bound
// to it (the API server here has no Node authorizer, which would grant that
// role's rights to nodes by itself). Everything it does after setting up —
// reading pods, ConfigMaps and Secrets, requesting tokens, writing pod and
// node status, the Lease, Events — it does as that user.

// nodeLeaseNamespace holds the nodes' Leases.
const nodeLeaseNamespace = "kube-node-lease"

// notReadyTaint is the taint the API server's TaintNodesByCondition
// admission puts on a new Node, and kube-controller-manager's node
// lifecycle controller removes once the Node reports Ready.
const notReadyTaint = "node.kubernetes.io/not-ready"

func (n *Node) userName() string { return "system:node:" + n.opts.Name }

func (n *Node) bindingName() string { return "flagplane-node:" + n.opts.Name }

// credentials provisions the node's user and returns a client as that user.
func (n *Node) credentials(ctx context.Context) (kubernetes.Interface, error) {
	user, err := n.cp.Env.AddUser(envtest.User{Name: n.userName(), Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("provisioning the node's user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("rendering the node's kubeconfig: %w", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the node's kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100 // a kubelet's defaults
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: n.bindingName()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: n.userName()}},
	}
	if _, err := n.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("binding ClusterRole system:node to %s: %w", n.userName(), err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The API server's RBAC authorizer learns of the binding from its own
	// informer, moments later (longer on a busy machine), and refuses the
	// node until then: wait until the API server says the node may
	// register, as it will say to the registration itself.
	may := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes"}}}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, may, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the API server to authorize %s to register its Node: %w", n.userName(), err)
	}
	return client, nil
}

// nodeObject is the Node as the agent registers it.
func (n *Node) nodeObject(version string) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   n.opts.Name,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range n.opts.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    n.opts.Capacity,
			Allocatable: n.opts.Capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.facts.ip},
				{Type: corev1.NodeHostName, Address: n.opts.Name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
				KubeletVersion:          version,
				ContainerRuntimeVersion: "flagplane-node://1",
			},
			Conditions: n.conditions(metav1.Now()),
		},
	}
}

// conditions are the node's conditions at a heartbeat: Ready, and no
// pressure of any kind (nothing is measured).
func (n *Node) conditions(at metav1.Time) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: at, LastTransitionTime: at}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "not measured by the flagplane test node"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "not measured by the flagplane test node"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "not measured by the flagplane test node"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "flagplane test node is posting ready status"),
	}
}

// register creates the Node (or takes over one of the same name).
func (n *Node) register(ctx context.Context) error {
	version := "unknown"
	if v, err := n.client.Discovery().ServerVersion(); err == nil {
		version = v.GitVersion // a node runs its control plane's version
	}
	want := n.nodeObject(version)
	nodes := n.client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = n.writeNodeStatus(ctx, want.Status)
	}
	if err != nil {
		return fmt.Errorf("registering Node %s: %w", n.opts.Name, err)
	}
	return n.renewLease(ctx)
}

func (n *Node) writeNodeStatus(ctx context.Context, st corev1.NodeStatus) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	node.Status = st
	_, err = n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the node's Lease every quarter of its duration, and
// writes its status every StatusInterval, until the node stops.
func (n *Node) heartbeat() {
	lease := time.NewTicker(n.opts.LeaseDuration / 4)
	defer lease.Stop()
	status := time.NewTicker(n.opts.StatusInterval)
	defer status.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-lease.C:
			if err := n.renewLease(n.ctx); err != nil && n.ctx.Err() == nil {
				n.logf("renewing the node lease: %v", err)
			}
		case <-status.C:
			err := retryConflict(func() error {
				node, err := n.client.CoreV1().Nodes().Get(n.ctx, n.opts.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				at := metav1.Now()
				for i := range node.Status.Conditions {
					node.Status.Conditions[i].LastHeartbeatTime = at
				}
				_, err = n.client.CoreV1().Nodes().UpdateStatus(n.ctx, node, metav1.UpdateOptions{})
				return err
			})
			if err != nil && n.ctx.Err() == nil {
				n.logf("writing the node status: %v", err)
			}
		}
	}
}

func (n *Node) renewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(nodeLeaseNamespace)
	renew := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name, Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.opts.Name),
				LeaseDurationSeconds: ptr.To(int32(n.opts.LeaseDuration / time.Second)),
				RenewTime:            &renew,
			},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &renew
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// waitSchedulable waits until the node lifecycle controller has removed
// the not-ready taint, so that the scheduler considers the node.
func (n *Node) waitSchedulable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var taints []corev1.Taint
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		taints = node.Spec.Taints
		for _, t := range taints {
			if t.Key == notReadyTaint {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("Node %s still has taints %v: the scheduler would not place pods on it. "+
			"kube-controller-manager's nodelifecycle controller removes the %s taint of a Ready node "+
			"(controlplane.DefaultControllers has it): %w", n.opts.Name, taints, notReadyTaint, err)
	}
	return nil
}

// unregister removes the Node (its Lease goes with it, by ownerReference)
// and the node's ClusterRoleBinding, so that nothing is scheduled to a node
// that no longer runs pods.
func (n *Node) unregister() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if err := n.admin.CoreV1().Nodes().Delete(ctx, n.opts.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting Node %s: %w", n.opts.Name, err))
	}
	if err := n.admin.RbacV1().ClusterRoleBindings().Delete(ctx, n.bindingName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting ClusterRoleBinding %s: %w", n.bindingName(), err))
	}
	return errors.Join(errs...)
}

func retryConflict(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}
