package staging

import (
	"math"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

func TestGates(t *testing.T) {
	g := NewWithT(t)
	w := topology.WorkloadKey(topology.KindDeployment, "a", "web")
	ready := Pod{Namespace: "a", Name: "web-1", Workload: w, Ready: true, ReadySince: t0}
	unready := Pod{Namespace: "a", Name: "web-2", Workload: w, Ready: false, ReadySince: t0}
	podsReady := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GatePodsReady, For: &metav1.Duration{Duration: 30 * time.Second}}}
	g.Expect(GateFailure(podsReady, []Pod{ready, unready}, t0.Add(10*time.Second), t0)).To(BeEmpty(), "within its grace")
	g.Expect(GateFailure(podsReady, []Pod{ready, unready}, t0.Add(31*time.Second), t0)).To(ContainSubstring("pod a/web-2 of Deployment web is not Ready"))
	g.Expect(NextCheck(podsReady, []Pod{ready, unready}, t0.Add(10*time.Second))).To(Equal(20*time.Second), "when its grace ends, no event says so")
	g.Expect(NextCheck(podsReady, []Pod{ready}, t0.Add(10*time.Second))).To(BeZero())

	restarted := Pod{Namespace: "a", Name: "web-3", Workload: w, Ready: true, Restarts: []Restart{{Container: "app", Count: 2, Finished: t0.Add(5 * time.Second)}}}
	restarts := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateRestarts, Max: ptr.To[int64](1)}}
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0)).To(BeEmpty(), "one restart is within the bound")
	restarted.Restarts = append(restarted.Restarts, Restart{Container: "flagd", Count: 1, Finished: t0.Add(6 * time.Second)})
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0)).To(ContainSubstring("2 container restart(s)"))
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0.Add(10*time.Second))).To(BeEmpty(), "restarts before the step are not the rollout's")
	g.Expect(GateFailure(restarts, []Pod{restarted}, t0.Add(time.Minute), t0.Add(5*time.Second))).To(BeEmpty(), "a restart in the second the step started is not told from one before")

	errorsGate := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateEvaluationErrors, Max: ptr.To[int64](1)}}
	flagd := func(name string, errs int64) Pod {
		return Pod{Namespace: "a", Name: name, Workload: w, Ready: true, ManagementPort: 8014, EvaluationErrors: errs}
	}
	g.Expect(GateFailure(errorsGate, []Pod{flagd("web-1", 1), flagd("web-2", -1)}, t0, t0)).To(BeEmpty(), "one error, and one flagd not read")
	g.Expect(GateFailure(errorsGate, []Pod{flagd("web-1", 1), flagd("web-2", 1)}, t0, t0)).To(ContainSubstring("flagd answered 2 evaluation(s) with an error"))
	g.Expect(GateFailure(errorsGate, []Pod{{Namespace: "a", Name: "no-sidecar", EvaluationErrors: 7}}, t0, t0)).To(BeEmpty(), "a pod without flagd")
}

// TestGatesSumsSaturate: counts that would wrap an int64 saturate, so that
// two pods reporting huge counts cannot hide the others' errors. (Before,
// two pods of 5e18 summed to a negative number, which passed.)
func TestGatesSumsSaturate(t *testing.T) {
	g := NewWithT(t)
	w := topology.WorkloadKey(topology.KindDeployment, "a", "web")
	errorsGate := []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateEvaluationErrors, Max: ptr.To[int64](10)}}
	huge := func(name string) Pod {
		return Pod{Namespace: "a", Name: name, Workload: w, ManagementPort: 8014, EvaluationErrors: 5_000_000_000_000_000_000}
	}
	g.Expect(GateFailure(errorsGate, []Pod{huge("x"), huge("y"), {Namespace: "a", Name: "z", ManagementPort: 8014, EvaluationErrors: 3}}, t0, t0)).
		To(ContainSubstring("9223372036854775807 evaluation(s)"))
	g.Expect(AddCounts(math.MaxInt64, 1)).To(Equal(int64(math.MaxInt64)))
	g.Expect(AddCounts(math.MaxInt64-1, 1)).To(Equal(int64(math.MaxInt64)))
	g.Expect(AddCounts(2, 3)).To(Equal(int64(5)))
	g.Expect(AddCounts(-4, 3)).To(Equal(int64(3)))
}

// TestPodOfReadsOnlyTheSidecar: the metrics port is the injected flagd
// sidecar's management port, never an application's port of the same
// name, and not at all on the host's network. (Before, the last port
// named management of any container won: Spring Boot's, for one.)
func TestPodOfReadsOnlyTheSidecar(t *testing.T) {
	g := NewWithT(t)
	always := corev1.ContainerRestartPolicyAlways
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-1", UID: "u1"},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "flagd", RestartPolicy: &always,
					Ports: []corev1.ContainerPort{{Name: "management", ContainerPort: 8014}}}},
				Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: "management", ContainerPort: 8081}}}},
			},
			Status: corev1.PodStatus{PodIP: "10.0.0.7"}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	w := topology.WorkloadKey(topology.KindDeployment, "a", "web")
	g.Expect(PodOf(pod(nil), w).ManagementPort).To(Equal(int32(8014)), "the sidecar's, not the app's later one")
	g.Expect(PodOf(pod(nil), w).EvaluationErrors).To(Equal(int64(-1)), "unknown until read")
	g.Expect(PodOf(pod(func(p *corev1.Pod) { p.Spec.InitContainers = nil }), w).ManagementPort).To(BeZero(), "no sidecar: the app's port is not read")
	g.Expect(PodOf(pod(func(p *corev1.Pod) { p.Spec.InitContainers[0].RestartPolicy = nil }), w).ManagementPort).To(BeZero(),
		"an init container that is no sidecar")
	g.Expect(PodOf(pod(func(p *corev1.Pod) {
		p.Spec.InitContainers = nil
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "flagd", Ports: []corev1.ContainerPort{{Name: "management", ContainerPort: 8014}}})
	}), w).ManagementPort).To(BeZero(), "a container named flagd is not flagplane's sidecar")
	g.Expect(PodOf(pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), w).ManagementPort).To(BeZero(), "the node's ports are not read")
}
