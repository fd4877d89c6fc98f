package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/flagplane/flagplane/test/internal/child"
)

// schedulerUser is kube-scheduler's own user, which the API server's
// bootstrap RBAC policy binds to the system:kube-scheduler and
// system:volume-scheduler ClusterRoles: it runs with a real scheduler's
// rights, no more.
const schedulerUser = "system:kube-scheduler"

// startScheduler runs kube-scheduler as its own user.
func (cp *ControlPlane) startScheduler(binDir, gogc string) error {
	user, err := cp.Env.AddUser(envtest.User{Name: schedulerUser}, nil)
	if err != nil {
		return fmt.Errorf("provisioning the kube-scheduler user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering the kube-scheduler kubeconfig: %w", err)
	}
	kubeconfigPath := filepath.Join(cp.Dir, "kube-scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the kube-scheduler kubeconfig: %w", err)
	}
	out, err := cp.createLog(cp.SchedulerLogPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(binDir, "kube-scheduler"),
		"--kubeconfig="+kubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0", // nothing to serve: readiness is checked by its effects
	)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = processEnv(gogc)
	if cp.scheduler, err = child.Start(cmd); err != nil {
		return fmt.Errorf("starting kube-scheduler: %w", err)
	}
	return nil
}

// Names of the objects by which Start checks that kube-scheduler binds
// pods. The Node has a taint that only the probe Pod tolerates, so that
// nothing else is ever scheduled to it; both are deleted before Start
// returns.
const (
	probeNodeName  = "flagplane-controlplane-probe-node"
	probeTaintKey  = "flagplane.dev/controlplane-probe"
	probePodPrefix = "flagplane-scheduler-probe-"
)

// waitForScheduler returns once kube-scheduler has bound a probe Pod to a
// probe Node: a scheduler that is running but not scheduling proves
// nothing.
func (cp *ControlPlane) waitForScheduler(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	one := resource.MustParse("1")
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: probeNodeName, Labels: map[string]string{corev1.LabelHostname: probeNodeName}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: probeTaintKey, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: one, corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: one},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: one, corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: one},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Probe"}},
		},
	}
	if err := cp.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("creating the scheduler's probe Node: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, GenerateName: probePodPrefix},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: probeNodeName},
			// Every taint: the probe Node's own, and the not-ready one that
			// the API server adds to a new Node.
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "probe", Image: "probe"}},
		},
	}
	if err := cp.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating the scheduler's probe Pod: %w", err)
	}
	err := cp.waitForSchedulerEffect(ctx, "kube-scheduler to bind the probe Pod", func(ctx context.Context) (bool, error) {
		got := &corev1.Pod{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false, err
		}
		return got.Spec.NodeName == probeNodeName, nil
	})
	// Whatever happened, clean up: the probe objects must not outlive Start.
	zero := int64(0)
	if delErr := cp.Client.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: &zero}); delErr != nil && !apierrors.IsNotFound(delErr) && err == nil {
		err = fmt.Errorf("deleting the scheduler's probe Pod: %w", delErr)
	}
	if delErr := cp.Client.Delete(ctx, node); delErr != nil && !apierrors.IsNotFound(delErr) && err == nil {
		err = fmt.Errorf("deleting the scheduler's probe Node: %w", delErr)
	}
	return err
}

// waitForSchedulerEffect polls cond, failing early with the tail of the
// scheduler's log if it exits.
func (cp *ControlPlane) waitForSchedulerEffect(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !cp.scheduler.Running() {
			return false, fmt.Errorf("kube-scheduler exited (%v); last lines of %s:\n%s",
				cp.scheduler.Err(), cp.SchedulerLogPath, tail(cp.SchedulerLogPath, 20))
		}
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err
		}
		return ok, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last error: %w)", err, lastErr)
		}
		return fmt.Errorf("waiting for %s (log %s):\n%s\n%w", what, cp.SchedulerLogPath, tail(cp.SchedulerLogPath, 20), err)
	}
	return nil
}
