package node_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The shape flagplane injects: flagd as a native sidecar (an init
// container with restartPolicy Always and a startup probe), and an app
// container that reaches it through FLAGD_* environment variables. Here the
// app is a second, real flagd that syncs from the sidecar's sync port,
// named by $(FLAGD_SYNC_PORT) in its arguments: it can only work if the
// node starts the sidecar first and rewrites the port consistently.
var _ = Describe("a Pod with flagd as a native sidecar", func() {
	It("starts the sidecar first, after its startup probe, and its app reaches it through the rewritten port", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags"},
			Data:       map[string]string{"flags.flagd.json": flagFile("off")},
		}
		sidecar := flagdContainer("flagd", "start", "--management-port", "8014", "--port", "8013",
			"--sources", `[{"uri":"/etc/flagd/flags/flags.flagd.json","provider":"file"}]`)
		sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		sidecar.Ports = append(sidecar.Ports, corev1.ContainerPort{Name: "flagd-sync", ContainerPort: 8015})
		sidecar.VolumeMounts = []corev1.VolumeMount{{Name: "flags", MountPath: "/etc/flagd/flags", ReadOnly: true}}
		// The app may not start before the probe passed, which is 2 s at least.
		sidecar.StartupProbe = httpProbe("/healthz", 8014)
		sidecar.StartupProbe.InitialDelaySeconds = 2
		sidecar.StartupProbe.FailureThreshold = 30

		app := flagdContainer("app", "start", "--port", "9013", "--management-port", "9014", "--sync-port", "9015", "--ofrep-port", "9016",
			"--sources", `[{"uri":"127.0.0.1:$(FLAGD_SYNC_PORT)","provider":"grpc"}]`)
		app.Ports = []corev1.ContainerPort{{ContainerPort: 9013}, {ContainerPort: 9014}}
		app.Env = []corev1.EnvVar{{Name: "FLAGD_SYNC_PORT", Value: "8015"}}

		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{sidecar},
				Containers:     []corev1.Container{app},
				Volumes: []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "flags"}},
				}}},
			},
		}
		create(ctx, cm, pod)
		Eventually(getPod(ctx, key(pod))).Should(And(
			haveCondition(corev1.PodInitialized, corev1.ConditionTrue),
			HaveField("Status.InitContainerStatuses", ConsistOf(And(HaveField("Name", "flagd"),
				HaveField("Started", HaveValue(BeTrue())), HaveField("State.Running", Not(BeNil()))))),
			HaveField("Status.ContainerStatuses", ConsistOf(HaveField("State.Running", Not(BeNil())))),
		))

		By("the app started after the sidecar passed its startup probe")
		sidecarPID, appPID := pidOf(key(pod), "flagd"), pidOf(key(pod), "app")
		Expect(startTicks(appPID)-startTicks(sidecarPID)).To(BeNumerically(">=", 2*clockTicks),
			"the app started less than the probe's initial delay after the sidecar")

		By("the app's FLAGD_SYNC_PORT is the sidecar's remapped sync port")
		syncPort, ok := n.PortOf(key(pod), "flagd", 8015)
		Expect(ok).To(BeTrue())
		Expect(environOf(appPID)).To(HaveKeyWithValue("FLAGD_SYNC_PORT", strconv.Itoa(syncPort)))

		By("the app's flagd evaluates the flag synced from the sidecar over gRPC, and follows an edit")
		appAddr := addrOf(key(pod), "app", 9013)
		Eventually(resolve(appAddr)).Should(Equal(evaluated("off")))
		setFlagFile(cm, "on")
		edited := time.Now()
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		Eventually(resolve(appAddr)).WithPolling(20 * time.Millisecond).Should(Equal(evaluated("on")))
		AddReportEntry("ConfigMap edit to new value in the app's flagd (file → sidecar → gRPC → app)", time.Since(edited).String())
		Eventually(getPod(ctx, key(pod))).Should(beReady())

		By("deleting the Pod stops the app, then the sidecar")
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(processGone(appPID)).Should(BeTrue())
		Eventually(processGone(sidecarPID)).Should(BeTrue())
		Eventually(gone(ctx, key(pod))).Should(BeTrue())
	})
})
