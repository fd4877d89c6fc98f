package realinstall

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The EvaluationErrors gate reads flagd's metrics the way it does in
// production: the manager, a pod of the chart on the real node, reads each
// canary pod's IP at the injected sidecar's management port, over the
// pod network. Two canary pods are a hostile tenant's: their pod template
// has a native sidecar of its own, which starts before the flagd sidecar
// flagplane appends and takes its management port, and
//
//   - in one, answers every read with a redirect to a server of the
//     test's on the host;
//   - in the other, accepts every connection and never answers.
//
// The gate must halt the rollout on the good pod's errors all the same,
// and no request may reach where the redirect points.

// hostileImage runs test/realinstall/hostile, the hostile tenant's server.
const hostileImage = "localhost:5000/flagplane/hostile:dev"

// buildHostile builds test/realinstall/hostile, static, for its image.
func buildHostile(root string) string {
	GinkgoHelper()
	bin := filepath.Join(GinkgoT().TempDir(), "hostile")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./test/realinstall/hostile")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	return bin
}

// hostileApp is a Deployment opted in to src whose pod template has a
// native sidecar of its own, squatter, which takes the injected flagd's
// management port before flagd starts and answers there as args say
// (test/realinstall/hostile). flagd, kept from starting, cannot say what
// the pod serves: the squatter takes its sync port too and answers what
// the flag set's generated ConfigMap of the namespace, mounted into it,
// holds (f's), so that the pod confirms the revision its volume holds
// and the canary step reaches its gates, as a tenant in control of its
// pod can make it.
func hostileApp(ns, name string, f topology.Key, args ...string) *appsv1.Deployment {
	d := app(ns, name, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"})
	file := "/squatted/" + topology.ConfigMapDataKey(f)
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "squatted",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: topology.ConfigMapName(f)}}}})
	d.Spec.Template.Spec.InitContainers = append(d.Spec.Template.Spec.InitContainers, corev1.Container{
		Name: "squatter", Image: hostileImage,
		Args:          append([]string{"-sync", ":8015", file, ":" + strconv.Itoa(int(injection.DefaultManagementPort))}, args...),
		VolumeMounts:  []corev1.VolumeMount{{Name: "squatted", MountPath: "/squatted"}},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	return d
}

var _ = Describe("the EvaluationErrors gate on the real node", func() {
	It("reads the canary pods' flagd through their IPs, halts on a good pod's errors while a pod redirects and a pod never answers, and follows no redirect", func(ctx SpecContext) {
		s := newStagedFlag(ctx)

		By("a server of the test's on the host, where the redirect points: it counts what reaches it")
		l, err := net.Listen("tcp", net.JoinHostPort(cluster.HostIP().String(), "0"))
		Expect(err).NotTo(HaveOccurred())
		var reached atomic.Int32
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				reached.Add(1)
				_ = c.Close()
			}
		}()
		DeferCleanup(l.Close)

		By("two hostile canary pods, whose own sidecar takes flagd's management port: one redirects, one never answers")
		f := topology.FlagSetKey(s.flags, "checkout")
		create(ctx, hostileApp(s.canary, "redirect", f, "redirect", "http://"+l.Addr().String()+"/stolen"), hostileApp(s.canary, "silent", f, "silent"))
		for _, name := range []string{"redirect", "silent"} {
			running(ctx, s.canary, name)
		}

		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
					{Name: "everyone", Percentage: ptr.To[int32](100)},
				},
				Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateEvaluationErrors, Max: ptr.To[int64](1)}},
			},
		}
		create(ctx, policy)
		Eventually(rolloutStatus(ctx, policy)).WithTimeout(deliveryTimeout).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))
		stable, err := rolloutStatus(ctx, policy)()
		Expect(err).NotTo(HaveOccurred())

		By("an edit reaches the canary step, which waits for approval")
		setVariant(ctx, s.ff, "on")
		inStep(ctx, s, policy, stable.StableRevision, deliveryv1alpha1.PhasePaused)

		By("the manager reads both hostile pods: the redirect is not followed")
		for _, name := range []string{"redirect", "silent"} {
			Eventually(logsOf(s.canary, podOf(ctx, s.canary, name), "squatter")).WithTimeout(time.Minute).WithPolling(time.Second).
				Should(ContainSubstring("GET /metrics HTTP/1.1"), func() string {
					return fmt.Sprintf("the manager's read reached pod %s's management port\n%s", name, managerLogs(ctx))
				})
		}

		By("one error at the good pod is within max; a second halts the rollout, whatever the other two pods do")
		_, _ = flagdapi.Resolve(ctx, s.addrs[s.canary], flagdapi.Boolean, "no-such-flag", nil)
		Consistently(rolloutStatus(ctx, policy)).WithTimeout(12 * time.Second).WithPolling(poll).Should(HaveField("Phase", deliveryv1alpha1.PhasePaused))
		_, _ = flagdapi.Resolve(ctx, s.addrs[s.canary], flagdapi.Boolean, "no-such-flag", nil)
		erred := time.Now()
		Eventually(rolloutStatus(ctx, policy)).WithTimeout(time.Minute).WithPolling(poll).Should(And(
			HaveField("Phase", deliveryv1alpha1.PhaseHalted),
			HaveField("Message", ContainSubstring("gate EvaluationErrors failed: flagd answered 2 evaluation(s) with an error"))))
		halted := time.Since(erred)
		serves(s.addrs[s.canary], "off")
		AddReportEntry("EvaluationErrors on the real node: second error to Halted, with a redirecting and a frozen pod in the step", fmtDuration(halted))

		Expect(reached.Load()).To(BeZero(), "no request reached where the redirect points")
		logs, err := logsOf(s.canary, podOf(ctx, s.canary, "redirect"), "squatter")()
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("EvaluationErrors on the real node: reads of the redirecting pod", fmt.Sprint(strings.Count(logs, "GET /metrics")))
	})
})

// managerLogs is the last lines of every manager replica's log.
func managerLogs(ctx context.Context) string {
	var b strings.Builder
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(systemNS), client.MatchingLabels{"app.kubernetes.io/name": "flagplane"}); err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		out, _ := cluster.Kubectl("logs", "-n", systemNS, p.Name, "--tail=60")
		fmt.Fprintf(&b, "==> %s <==\n%s\n", p.Name, out)
	}
	return b.String()
}

// livePods are the pods of app in ns that are not being deleted.
func livePods(ctx context.Context, g Gomega, ns, app string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// podOf is the name of the one live pod of app in ns.
func podOf(ctx context.Context, ns, app string) string {
	GinkgoHelper()
	var name string
	Eventually(func(g Gomega) {
		pods := livePods(ctx, g, ns, app)
		g.Expect(pods).To(HaveLen(1))
		name = pods[0].Name
	}).WithTimeout(podReadyTimeout).WithPolling(poll).Should(Succeed())
	return name
}

// running waits until the one pod of app in ns runs its container
// squatter (it need not be Ready: its flagd cannot take its port).
func running(ctx context.Context, ns, app string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		pods := livePods(ctx, g, ns, app)
		g.Expect(pods).To(HaveLen(1))
		var up bool
		for _, cs := range pods[0].Status.ContainerStatuses {
			up = up || (cs.Name == "squatter" && cs.State.Running != nil)
		}
		for _, cs := range pods[0].Status.InitContainerStatuses {
			up = up || (cs.Name == "squatter" && cs.State.Running != nil)
		}
		g.Expect(up).To(BeTrue(), "container squatter of %s runs", pods[0].Name)
	}).WithTimeout(podReadyTimeout).WithPolling(poll).Should(Succeed(), func() string { return podReport(ctx, ns) })
}
