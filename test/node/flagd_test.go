package node_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("a Pod running flagd on a ConfigMap volume", func() {
	It("is scheduled to the node, serves the flag, follows every edit of the ConfigMap, and stops when deleted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		cm, pod := flagdOnConfigMap(ns, "flagd", "off")
		pod.Spec.Containers[0].ReadinessProbe = httpProbe("/readyz", 8014)
		created := time.Now()
		create(ctx, cm, pod)

		By("kube-scheduler binds it to the node, which runs it until it is Ready")
		Eventually(getPod(ctx, key(pod))).WithPolling(20 * time.Millisecond).Should(And(beReady(), HaveField("Status.Phase", corev1.PodRunning)))
		AddReportEntry("Pod created to Ready (scheduled, volume projected, flagd started, readiness probe passed)", time.Since(created).String())
		got, err := getPod(ctx, key(pod))()
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Spec.NodeName).To(Equal(n.Name()))
		Expect(got.Status.PodIP).To(Equal("127.0.0.1"))
		Expect(got.Status.ContainerStatuses).To(ConsistOf(And(
			HaveField("Name", "flagd"), HaveField("Ready", true), HaveField("Started", HaveValue(BeTrue())),
			HaveField("RestartCount", BeZero()), HaveField("State.Running", Not(BeNil())),
			HaveField("ImageID", HavePrefix("flagplane-node://flagd@sha256:")), HaveField("Image", flagdImage),
		)))

		addr := addrOf(key(pod), "flagd", 8013)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("the process sees the volume at its mountPath, behind the kubelet's ..data symlink")
		pid := pidOf(key(pod), "flagd")
		dir := "/etc/flagd/" + ns + "_flagd"
		dataLink := dir + "/..data"
		first, err := n.Readlink(key(pod), "flagd", dataLink)
		Expect(err).NotTo(HaveOccurred())
		Expect(first).To(HavePrefix("..20"))
		Expect(n.ReadFile(key(pod), "flagd", dir+"/"+ns+"_flagd.flagd.json")).To(BeEquivalentTo(flagFile("off")))

		By("editing the ConfigMap, several times")
		var took []time.Duration
		variant := "off"
		for range 5 {
			if variant == "off" {
				variant = "on"
			} else {
				variant = "off"
			}
			setFlagFile(cm, variant)
			edited := time.Now()
			Expect(k8s.Update(ctx, cm)).To(Succeed())
			Eventually(resolve(addr)).WithPolling(10 * time.Millisecond).Should(Equal(evaluated(variant)))
			took = append(took, time.Since(edited))
		}
		AddReportEntry("ConfigMap edit to new value served by flagd through the node",
			"p50 "+percentile(took, 50).String()+", max "+percentile(took, 100).String()+", of 5 edits")
		Expect(n.Readlink(key(pod), "flagd", dataLink)).NotTo(Equal(first), "the edit arrived by a ..data swap")
		Expect(pidOf(key(pod), "flagd")).To(Equal(pid), "flagd followed the edits without a restart")

		By("deleting the Pod")
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(processGone(pid)).Should(BeTrue(), "flagd still runs")
		Eventually(gone(ctx, key(pod))).Should(BeTrue(), "the node deletes the pod object once its processes have stopped")
		_, ok := n.PortOf(key(pod), "flagd", 8013)
		Expect(ok).To(BeFalse(), "the pod's ports are released")
	})
})

var _ = Describe("readiness", func() {
	It("makes a Pod Ready only while its readiness probe passes", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		probe := newProbeServer()
		app := corev1.Container{Name: "app", Image: "example.com/shop/app:1.0"}
		app.ReadinessProbe = &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "127.0.0.1", Port: probe.port(), Path: "/ready"}},
			PeriodSeconds: 1, FailureThreshold: 1,
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{app}},
		}
		create(ctx, pod)

		By("the container runs, but its probe fails")
		Eventually(getPod(ctx, key(pod))).Should(HaveField("Status.ContainerStatuses",
			ConsistOf(HaveField("State.Running", Not(BeNil())))))
		Eventually(probe.requests).Should(BeNumerically(">=", 2))
		Consistently(getPod(ctx, key(pod))).Should(And(
			haveCondition(corev1.PodReady, corev1.ConditionFalse),
			haveCondition(corev1.ContainersReady, corev1.ConditionFalse),
			HaveField("Status.Phase", corev1.PodRunning)))

		By("the probe passes")
		probe.setHealthy(true)
		Eventually(getPod(ctx, key(pod))).Should(beReady())

		By("the probe fails again")
		probe.setHealthy(false)
		Eventually(getPod(ctx, key(pod))).Should(haveCondition(corev1.PodReady, corev1.ConditionFalse))
		Expect(probe.userAgents()).To(HaveEach(HavePrefix("kube-probe/")))

		By("the placeholder says what it is, in its status and its log")
		Expect(getPod(ctx, key(pod))()).To(And(
			HaveField("Status.ContainerStatuses", ConsistOf(HaveField("ImageID", "flagplane-node://placeholder"))),
			HaveField("Status.Conditions", ContainElement(And(
				HaveField("Type", corev1.PodConditionType("flagplane.dev/PlaceholderContainers")),
				HaveField("Message", ContainSubstring("app")))))))
		Expect(n.Logs(key(pod), "app")).To(ContainSubstring("idle placeholder"))
	})
})

var _ = Describe("liveness", func() {
	It("restarts a container whose liveness probe fails", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		cm, pod := flagdOnConfigMap(ns, "flagd", "off")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		live := httpProbe("/no-such-path", 8014)
		live.FailureThreshold = 2
		pod.Spec.Containers[0].LivenessProbe = live
		create(ctx, cm, pod)

		Eventually(getPod(ctx, key(pod))).Should(HaveField("Status.ContainerStatuses", ConsistOf(And(
			HaveField("RestartCount", BeNumerically(">=", 1)),
			HaveField("LastTerminationState.Terminated", Not(BeNil())),
		))))
		Expect(n.Logs(key(pod), "flagd")).To(ContainSubstring("--- run 1 ---"))
		Eventually(func() ([]corev1.Event, error) {
			var events corev1.EventList
			err := k8s.List(ctx, &events, client.InNamespace(ns))
			return events.Items, err
		}).Should(ContainElements(
			And(HaveField("Reason", "Unhealthy"), HaveField("Message", ContainSubstring("Liveness probe failed: HTTP probe failed with statuscode: 404"))),
			And(HaveField("Reason", "Killing"), HaveField("Message", ContainSubstring("failed liveness probe, will be restarted"))),
		))
	})
})
