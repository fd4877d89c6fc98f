package realinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/realnode"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// Bounds of the waits: a 2-core machine running a node, a control plane
// and the build of the next package at once is slow, not broken.
const (
	podReadyTimeout = 3 * time.Minute
	deliveryTimeout = 2 * time.Minute
	poll            = 250 * time.Millisecond
)

const flagKey = fixtures.FlagKey

// newNamespace creates a namespace, removed after the spec with all it
// holds, and waits for its default ServiceAccount.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		// Not waited for: its pods go meanwhile, and their CPU requests with them.
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed())
	})
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	}).WithTimeout(time.Minute).Should(Succeed())
	return ns.Name
}

// create creates objs, each tried again when the API server did not get
// an answer from a webhook: make test runs the unit tests, the fuzz, OFO's
// suite and other suites beside this suite, and with both cores busy the
// manager's pod (its CPU request is the chart's 50m) once took more than
// the webhook's 5 s over a flag set of a megabyte that the same code
// judges in 80 ms of CPU time in-process; three tries in a row failed so
// during another suite's start. In a run from empty caches, a create
// right after that spec had its webhook call's connection reset. A try
// comes 5 s after the last, and a fifth failure in a row fails. What
// measures the webhooks' answers (webhooksAnswer, in the faults specs)
// calls the API server without it.
func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		var err error
		for try := range 5 {
			if try > 0 {
				GinkgoWriter.Printf("creating %T %s: %v; once more in 5s\n", o, o.GetName(), err)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
			}
			if err = k8s.Create(ctx, o); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
				break
			}
		}
		Expect(err).NotTo(HaveOccurred(), "creating %T %s", o, o.GetName())
	}
}

// app is a one-replica Deployment of a shell that sleeps: an application
// whose pod gets flagd beside it.
func app(ns, name string, podAnnotations map[string]string) *appsv1.Deployment {
	d := fixtures.Deployment(ns, name, nil, podAnnotations)
	d.Spec.Template.Spec.Containers[0].Image = realnode.BusyboxImage
	d.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "1000000"}
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return d
}

// setVariant sets the flag's default variant, as a user's edit would.
func setVariant(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	GinkgoHelper()
	// Read, change, write: refused with a conflict when the manager wrote
	// the status in between, as it does while the pods confirm the last
	// edit. With both cores busy, the suite's default of 1 s once passed
	// with every try refused; a user's edit tries again too.
	Eventually(func() error {
		var cur v1beta1.FeatureFlag
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur); err != nil {
			return err
		}
		f := cur.Spec.FlagSpec.Flags[flagKey]
		f.DefaultVariant = variant
		cur.Spec.FlagSpec.Flags[flagKey] = f
		return k8s.Update(ctx, &cur)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// injectedPod waits for the one pod of app that the kubelet reports Ready
// and that flagplane's webhook injected. A pod admitted before the
// manager's graph had its source (the two created together, and the
// manager behind its informers, as on a busy machine) is Ready with
// nothing injected until the healer's restart replaces it. Its address
// refuses flagd's port, then, once the pod is gone, answers nothing: a
// wait on it ends in "awaiting headers". That is the likely cause of 120 s
// of it in the staged rollout's setup in one run of make test, which kept
// no list of the pods to show it.
func injectedPod(ctx context.Context, ns, app string, also ...types.GomegaMatcher) *corev1.Pod {
	GinkgoHelper()
	return readyPod(ctx, ns, app, append([]types.GomegaMatcher{
		HaveField("ObjectMeta.Annotations", HaveKey(restarts.AnnotationInjection))}, also...)...)
}

// readyPod waits for the one pod of app that the kubelet reports Ready with
// every container running, injected or not.
func readyPod(ctx context.Context, ns, app string, also ...types.GomegaMatcher) *corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1))
		g.Expect(live[0]).To(beReady())
		for _, m := range also {
			g.Expect(live[0]).To(m)
		}
		pod = live[0]
	}).WithTimeout(podReadyTimeout).WithPolling(poll).Should(Succeed(), func() string { return podReport(ctx, ns) })
	return &pod
}

func beReady() types.GomegaMatcher {
	return And(
		HaveField("Status.Phase", corev1.PodRunning),
		HaveField("Status.Conditions", ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue)))),
	)
}

// podReport is what a failed wait for a pod shows: its namespace's pods and events.
func podReport(ctx context.Context, ns string) string {
	pods, _ := cluster.Kubectl("get", "pods", "-n", ns, "-o", "wide")
	return pods + "\n" + admissionRecords(ctx, ns) + fixtures.Events(ctx, k8s, ns)
}

// admissionRecords lists what flagplane's webhook recorded on each pod of
// ns (its flagplane.core.openfeature.dev annotations): a pod without its
// sidecar tells so whether the webhook admitted it with nothing to inject
// or was never reached.
func admissionRecords(ctx context.Context, ns string) string {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return "admission records: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, p := range pods.Items {
		var marks []string
		for k, v := range p.Annotations {
			if strings.HasPrefix(k, "flagplane.core.openfeature.dev/") {
				marks = append(marks, k+"="+v)
			}
		}
		slices.Sort(marks)
		fmt.Fprintf(&b, "%s (created %s): %s\n", p.Name, p.CreationTimestamp.Format(time.RFC3339), strings.Join(marks, " "))
	}
	return b.String()
}

// flagdAddr is the injected flagd's evaluation API at the pod's own
// address, which this machine routes to through the node.
func flagdAddr(pod *corev1.Pod) string {
	return net.JoinHostPort(pod.Status.PodIP, "8013")
}

type evaluation = flagdapi.Evaluation

func evaluated(variant string) evaluation {
	return evaluation{Value: variant == "on", Variant: variant, Reason: "STATIC"}
}

func resolve(addr string) func() (evaluation, error) {
	return func() (evaluation, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return flagdapi.Resolve(ctx, addr, flagdapi.Boolean, flagKey, nil)
	}
}

// serves waits until resolve(addr) answers variant, and returns when it did.
func serves(addr, variant string) time.Time {
	GinkgoHelper()
	Eventually(resolve(addr)).WithTimeout(deliveryTimeout).WithPolling(poll).Should(Equal(evaluated(variant)))
	return time.Now()
}

// logsOf is the logs of a container of a pod, through the API server and
// the kubelet.
func logsOf(ns, pod, container string) func() (string, error) {
	return func() (string, error) {
		return cluster.Kubectl("logs", "-n", ns, pod, "-c", container)
	}
}

// lastJSONLine decodes the last line of logs that decodes into a T with
// a non-zero value, for clients that print one JSON object a line.
func lastEvaluationIn(logs string) evaluation {
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct {
			evaluation
			ErrorCode *string `json:"errorCode"`
			Event     string  `json:"event"`
		}
		if json.Unmarshal([]byte(lines[i]), &e) == nil && e.Event == "" && e.Variant != "" {
			return e.evaluation
		}
	}
	return evaluation{}
}

// evaluationLogs is a transform for Eventually over logsOf.
func lastEvaluation(logs string) evaluation { return lastEvaluationIn(logs) }

// waitForManagers waits until n manager replicas are Ready on the node.
func waitForManagers(ctx context.Context, n int) []corev1.Pod {
	GinkgoHelper()
	var ready []corev1.Pod
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(systemNS), client.MatchingLabels{"app.kubernetes.io/name": "flagplane"})).To(Succeed())
		ready = nil
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				g.Expect(p).To(beReady(), "manager pod %s", p.Name)
				ready = append(ready, p)
			}
		}
		g.Expect(ready).To(HaveLen(n))
	}).WithTimeout(podReadyTimeout).WithPolling(time.Second).Should(Succeed(), func() string { return podReport(ctx, systemNS) })
	return ready
}

func fmtDuration(d time.Duration) string { return fmt.Sprint(d.Round(time.Millisecond)) }
