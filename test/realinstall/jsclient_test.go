package realinstall

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/realnode"
	"github.com/flagplane/flagplane/topology"
)

// A second language: an application in JavaScript with the OpenFeature
// server SDK and flagd's provider from npm (test/realclients/jsclient),
// which builds its provider with no options, so that only the env that
// flagplane injects tells it where its flags are. flagplane's own sync
// server is not one of its paths: it takes a service-account token as
// bearer credentials on every call, which the JavaScript provider has no
// option for; the sidecar syncs from it for the app instead (docs/concepts.md,
// "Applications with an OpenFeature SDK").
//
// Offline mode (FLAGD_OFFLINE_FLAG_SOURCE_PATH) has no spec: flagplane
// injects the variable from an InProcessConfiguration's
// offlineFlagSourcePath, but mounts nothing into app containers, so the
// file it names is the application's own.
var _ = Describe("JavaScript: the OpenFeature JS SDK on a real node, configured by the env flagplane injects", func() {
	It("rpc: the app evaluates against the injected sidecar (FLAGD_RESOLVER=rpc, FLAGD_PORT, the provider's default host localhost), which syncs from flagplane's sync server; an edit reaches the app, and the flag set's status counts the stream", func(ctx SpecContext) {
		ns := newNamespace(ctx, "js-rpc")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{{Source: "checkout", Provider: v1beta1.SyncProviderFlagdProxy}}),
			jsApp(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}))
		pod := injectedPod(ctx, ns, "web")
		Expect(pod.Spec.Containers[0].Env).To(And(
			ContainElement(corev1.EnvVar{Name: "FLAGD_RESOLVER", Value: "rpc"}),
			ContainElement(corev1.EnvVar{Name: "FLAGD_PORT", Value: "8013"}),
			Not(ContainElement(HaveField("Name", "FLAGD_HOST")))), "flagplane points the app at the sidecar")
		logs := logsOf(ns, pod.Name, "app")
		Eventually(logs).WithTimeout(deliveryTimeout).WithPolling(poll).Should(And(
			WithTransform(jsLines, ContainElement(jsEnvironment(HaveKeyWithValue("FLAGD_RESOLVER", "rpc")))),
			WithTransform(jsLines, ContainElement(HaveField("Event", "PROVIDER_READY"))),
			WithTransform(jsLines, ContainElement(jsEvaluation(evaluated("off")))),
			WithTransform(lastJSEvaluation, jsServed("off"))),
			func() string { return podReport(ctx, ns) })
		Eventually(streamsOf(ctx, ff)).WithTimeout(deliveryTimeout).Should(Equal(int32(1)), "the sidecar's stream")
		before := deliveredRevision(ctx, ff)

		edited := time.Now()
		setVariant(ctx, ff, "on")
		Eventually(logs).WithTimeout(deliveryTimeout).WithPolling(poll).Should(And(
			WithTransform(jsLines, ContainElement(jsEvaluation(evaluated("on")))),
			WithTransform(lastJSEvaluation, jsServed("on"))))
		AddReportEntry("JavaScript rpc (sidecar, flagd-proxy): edit to served", fmtDuration(time.Since(edited)))
		Expect(logs()).To(WithTransform(jsLines, ContainElement(HaveField("Event", "PROVIDER_CONFIGURATION_CHANGED"))),
			"flagd's event stream told the provider, which dropped its cache")
		Eventually(servedEverywhere(ctx, ff, "SyncSubscribers", ns)).WithTimeout(deliveryTimeout).Should(And(Not(BeEmpty()), Not(Equal(before))),
			"the status says the stream was sent the edit")
		Expect(appRestarts(ctx, pod)).To(BeZero(), "the app never exited (init-failed)")
	})

	It("in-process: the app syncs from a Flagd's sync port through its Service, as an InProcessConfiguration tells it (FLAGD_RESOLVER=in-process, FLAGD_HOST, FLAGD_PORT); an edit reaches the app, and the flag set's status says the Flagd's copy holds it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "js-inprocess")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		flagd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-flagd"}}
		flagd.Spec.FeatureFlagSource = "src"
		host := "shop-flagd." + ns + ".svc.cluster.local"
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sdk"}}
		ipc.Spec.Host, ipc.Spec.Port = host, 8015
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("checkout")}), flagd, ipc,
			jsApp(ns, "sdk", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "sdk"}))
		pod := injectedPod(ctx, ns, "sdk")
		Expect(pod.Spec.Containers[0].Env).To(And(
			ContainElement(corev1.EnvVar{Name: "FLAGD_RESOLVER", Value: "in-process"}),
			ContainElement(corev1.EnvVar{Name: "FLAGD_HOST", Value: host}),
			ContainElement(corev1.EnvVar{Name: "FLAGD_PORT", Value: "8015"})))
		logs := logsOf(ns, pod.Name, "app")
		Eventually(logs).WithTimeout(deliveryTimeout).WithPolling(poll).Should(And(
			WithTransform(jsLines, ContainElement(jsEnvironment(And(
				HaveKeyWithValue("FLAGD_RESOLVER", "in-process"), HaveKeyWithValue("FLAGD_HOST", host), HaveKeyWithValue("FLAGD_PORT", "8015"))))),
			WithTransform(jsLines, ContainElement(HaveField("Event", "PROVIDER_READY"))),
			WithTransform(lastJSEvaluation, jsEvaluation(evaluated("off")))),
			func() string { return podReport(ctx, ns) })
		before := deliveredRevision(ctx, ff)

		edited := time.Now()
		setVariant(ctx, ff, "on")
		Eventually(logs).WithTimeout(deliveryTimeout).WithPolling(poll).Should(WithTransform(lastJSEvaluation, jsEvaluation(evaluated("on"))))
		AddReportEntry("JavaScript in-process (a Flagd's sync port): edit to served", fmtDuration(time.Since(edited)))
		Eventually(servedEverywhere(ctx, ff, "ConfigMap", ns)).WithTimeout(deliveryTimeout).Should(And(Not(BeEmpty()), Not(Equal(before))),
			"the status says the Flagd's ConfigMap holds the edit")
		Expect(appRestarts(ctx, pod)).To(BeZero(), "the app never exited (init-failed)")
	})
})

// jsApp is a one-replica Deployment of the JavaScript client evaluating
// the fixtures' boolean flag. It waits up to 2 minutes for its provider: a
// Flagd created with it takes a moment to serve.
func jsApp(ns, name string, podAnnotations map[string]string) *appsv1.Deployment {
	d := app(ns, name, podAnnotations)
	c := &d.Spec.Template.Spec.Containers[0]
	c.Image = realnode.JSClientImage
	c.Command = nil
	c.Args = []string{"-flag", flagKey, "-type", "boolean", "-init-timeout", "2m"}
	return d
}

// appRestarts is how often the kubelet restarted the app container of pod.
func appRestarts(ctx SpecContext, pod *corev1.Pod) int32 {
	GinkgoHelper()
	var cur corev1.Pod
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &cur)).To(Succeed())
	for _, c := range cur.Status.ContainerStatuses {
		if c.Name == "app" {
			return c.RestartCount
		}
	}
	Fail("pod " + pod.Name + " has no status of its container app")
	return 0
}

// jsLine is one line of the client's output: an event, or an evaluation.
type jsLine struct {
	Event     string            `json:"event"`
	Message   string            `json:"message"`
	Flagd     map[string]string `json:"flagd"`
	Value     any               `json:"value"`
	Variant   string            `json:"variant"`
	Reason    string            `json:"reason"`
	ErrorCode string            `json:"errorCode"`
}

// jsLines decodes the client's JSON lines; a line that is not one (a
// warning of node's) is skipped.
func jsLines(logs string) []jsLine {
	var out []jsLine
	for _, l := range strings.Split(logs, "\n") {
		var j jsLine
		if json.Unmarshal([]byte(l), &j) == nil {
			out = append(out, j)
		}
	}
	return out
}

// lastJSEvaluation is the client's last evaluation line.
func lastJSEvaluation(logs string) jsLine {
	lines := jsLines(logs)
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i].Event == "" {
			return lines[i]
		}
	}
	return jsLine{}
}

func jsEnvironment(m types.GomegaMatcher) types.GomegaMatcher {
	return And(HaveField("Event", "environment"), HaveField("Flagd", m))
}

// jsEvaluation is an evaluation line without an error.
func jsEvaluation(e evaluation) types.GomegaMatcher {
	return And(HaveField("Event", ""), HaveField("ErrorCode", ""),
		HaveField("Value", e.Value), HaveField("Variant", e.Variant), HaveField("Reason", e.Reason))
}

// jsServed is flagd's answer over rpc, or the provider's cache of it: the
// JavaScript provider caches rpc evaluations (FLAGD_CACHE, lru by
// default; flagplane sets none for a sidecar) until flagd's event stream
// says the flags changed, and then answers with reason CACHED.
func jsServed(variant string) types.GomegaMatcher {
	want := evaluated(variant)
	return And(HaveField("Event", ""), HaveField("ErrorCode", ""),
		HaveField("Value", want.Value), HaveField("Variant", want.Variant), HaveField("Reason", BeElementOf("STATIC", "CACHED")))
}

// deliveredRevision is the flag set's revision once its status says every
// observed consumer holds it.
func deliveredRevision(ctx SpecContext, ff *v1beta1.FeatureFlag) string {
	GinkgoHelper()
	var rev string
	Eventually(func(g Gomega) {
		var cur v1beta1.FeatureFlag
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur)).To(Succeed())
		g.Expect(cur.Status.Revision).NotTo(BeEmpty())
		g.Expect(allDelivered(cur.Status.Delivered)).To(BeTrue(), "delivered %q: %+v", cur.Status.Delivered, cur.Status.Consumers)
		rev = cur.Status.Revision
	}).WithTimeout(deliveryTimeout).WithPolling(poll).Should(Succeed())
	return rev
}

// servedEverywhere is the revision of the flag set once its status says
// every observed consumer holds it, one of them of kind in namespace ns;
// "" until then.
func servedEverywhere(ctx SpecContext, ff *v1beta1.FeatureFlag, kind, ns string) func() (string, error) {
	return func() (string, error) {
		var cur v1beta1.FeatureFlag
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur); err != nil {
			return "", err
		}
		if cur.Status.Revision == "" || !allDelivered(cur.Status.Delivered) {
			return "", nil
		}
		for _, c := range cur.Status.Consumers {
			if c.Kind == kind && c.Namespace == ns && c.Revision == cur.Status.Revision {
				if kind == "ConfigMap" && c.Name != topology.ConfigMapName(topology.FlagSetKey(ff.Namespace, ff.Name)) {
					continue
				}
				return cur.Status.Revision, nil
			}
		}
		return "", nil
	}
}

// allDelivered tells whether a status's Delivered, "<up to date>/<all>",
// counts every consumer up to date, and at least one.
func allDelivered(d string) bool {
	upToDate, all, ok := strings.Cut(d, "/")
	return ok && upToDate == all && all != "0"
}
