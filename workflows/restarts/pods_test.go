package restarts_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/restarts"
	"github.com/flagplane/flagplane/workflows/staging"
)

// TestSlimPodKeepsWhatTheGatesRead: the health gates of staged rollouts
// read a pod from the manager's cache, which keeps pods slim; over random
// pods, they read a slim pod exactly as the whole one: its readiness, its
// restarts, and the injected flagd sidecar's management port (an init
// container that always restarts), never on the host's network. (Before,
// the slim pod moved the sidecar among the containers without its restart
// policy, and the EvaluationErrors gate found no sidecar to read.)
func TestSlimPodKeepsWhatTheGatesRead(t *testing.T) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(39, 1))
	w := topology.WorkloadKey(topology.KindDeployment, "a", "web")
	always := corev1.ContainerRestartPolicyAlways
	sidecarRead := 0
	for i := range 500 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("web-%d", i), UID: "u",
			CreationTimestamp: metav1.NewTime(time.Unix(1_800_000_000, 0))},
			Spec:   corev1.PodSpec{HostNetwork: rng.IntN(5) == 0},
			Status: corev1.PodStatus{PodIP: "10.0.0.1"}}
		port := func() []corev1.ContainerPort {
			return []corev1.ContainerPort{{Name: []string{"management", "http", "metrics"}[rng.IntN(3)], ContainerPort: int32(8000 + rng.IntN(100))}}
		}
		for range rng.IntN(3) {
			c := corev1.Container{Name: []string{"flagd", "init", "flagd"}[rng.IntN(3)], Ports: port()}
			if rng.IntN(2) == 0 {
				c.RestartPolicy = &always
			}
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		}
		for range 1 + rng.IntN(2) {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: []string{"app", "flagd"}[rng.IntN(2)], Ports: port()})
		}
		if rng.IntN(2) == 0 {
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(time.Unix(1_800_000_100, 0))}}
		}
		if rng.IntN(2) == 0 {
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 2,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(time.Unix(1_800_000_200, 0))}}}}
		}
		slim, err := restarts.SlimPod(pod.DeepCopy())
		g.Expect(err).NotTo(HaveOccurred())
		whole := staging.PodOf(pod, w)
		g.Expect(staging.PodOf(slim.(*corev1.Pod), w)).To(Equal(whole), "pod %d: %+v", i, pod.Spec)
		if whole.ManagementPort != 0 {
			sidecarRead++
		}
	}
	g.Expect(sidecarRead).To(BeNumerically(">", 30), "the pods reach the sidecar's port")
}
