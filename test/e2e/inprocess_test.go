package e2e

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// sdkOutput is what the SDK client of a pod wrote: the FLAGD_* environment
// it started with, and its evaluations, in order.
type sdkOutput struct {
	environment []map[string]string // one per run of the container
	evaluations []evaluation
}

func sdkOutputOf(pod k8stypes.NamespacedName) func() (sdkOutput, error) {
	return func() (sdkOutput, error) {
		logs, err := n.Logs(pod, "app")
		if err != nil {
			return sdkOutput{}, err
		}
		var out sdkOutput
		for _, l := range strings.Split(logs, "\n") {
			var line struct {
				Event     string            `json:"event"`
				Flagd     map[string]string `json:"flagd"`
				ErrorCode *string           `json:"errorCode"`
				evaluation
			}
			if json.Unmarshal([]byte(l), &line) != nil {
				continue
			}
			switch {
			case line.Event == "environment":
				out.environment = append(out.environment, line.Flagd)
			case line.ErrorCode != nil:
				line.evaluation.Code = *line.ErrorCode
				out.evaluations = append(out.evaluations, line.evaluation)
			}
		}
		return out, nil
	}
}

// lastEvaluation is the SDK's latest evaluation.
func lastEvaluation(o sdkOutput) evaluation {
	if len(o.evaluations) == 0 {
		return evaluation{}
	}
	return o.evaluations[len(o.evaluations)-1]
}

// envOf is the plain env of a container as a map.
func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

var _ = Describe("an InProcessConfiguration", func() {
	It("configures the OpenFeature Go SDK by the environment admission injected alone: it syncs in process from a standalone flagd and follows its edits; deleting the configuration leaves the running pod as it was admitted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		up := startUpstream(ctx, ns, "off")
		host, port, err := net.SplitHostPort(up.syncAddr)
		Expect(err).NotTo(HaveOccurred())
		p, err := strconv.Atoi(port)
		Expect(err).NotTo(HaveOccurred())
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sdk"}}
		ipc.Spec.Host, ipc.Spec.Port = host, int32(p)
		app := deployment(ns, "app", sdkClientImage, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "sdk"})
		// What the application itself decides: which flag it evaluates.
		app.Spec.Template.Spec.Containers[0].Args = []string{"-from-env", "-flag", flagKey, "-type", "boolean"}
		create(ctx, ipc, app)

		pod := readyPod(ctx, ns, "app")
		Expect(pod.Spec.InitContainers).To(BeEmpty(), "an in-process SDK needs no sidecar")
		injected := envOf(pod.Spec.Containers[0])
		Expect(injected).To(And(HaveKeyWithValue("FLAGD_RESOLVER", "in-process"),
			HaveKeyWithValue("FLAGD_HOST", host), HaveKeyWithValue("FLAGD_PORT", port)))
		Eventually(sdkOutputOf(key(pod))).Should(WithTransform(lastEvaluation, Equal(evaluated("off"))))
		out, err := sdkOutputOf(key(pod))()
		Expect(err).NotTo(HaveOccurred())
		Expect(out.environment).To(HaveEach(Equal(injected)), "the SDK saw exactly the FLAGD_* variables admission injected")

		By("editing the upstream's flags")
		up.setVariant(ctx, "on")
		Eventually(sdkOutputOf(key(pod))).Should(WithTransform(lastEvaluation, Equal(evaluated("on"))))

		By("deleting the InProcessConfiguration")
		Expect(k8s.Delete(ctx, ipc)).To(Succeed())
		staysAsAdmitted(ctx, pod)
		up.setVariant(ctx, "off")
		Eventually(sdkOutputOf(key(pod))).Should(WithTransform(lastEvaluation, Equal(evaluated("off"))), "the running SDK still syncs")
		// Its successor is never Ready for long: with no FLAGD_* variables its
		// SDK tries the provider's default, localhost:8013, where nothing
		// listens, and exits (init-failed). What counts is what it was given.
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		var next corev1.Pod
		Eventually(func(g Gomega) {
			pods, err := podsOf(ctx, ns, "app")()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(ConsistOf(Not(HaveField("UID", pod.UID))))
			next = pods[0]
		}).Should(Succeed(), "a pod replaced %s", pod.Name)
		Expect(next.Spec.Containers[0].Env).To(BeEmpty(), "a pod admitted now gets no FLAGD_* variables")
		Eventually(sdkOutputOf(key(&next))).Should(WithTransform(func(o sdkOutput) []map[string]string { return o.environment },
			ContainElement(BeEmpty())), "its SDK starts with no FLAGD_* variables")
	})
})
