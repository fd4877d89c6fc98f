package realinstall

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/realnode"
	"github.com/flagplane/flagplane/topology"
)

// Every delivery path, end to end, with Pods the real kubelet runs from
// what admission wrote: create, evaluate, edit, the new value served, delete.
var _ = Describe("delivery on a real node", func() {
	optedIn := map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}

	It("file: the kubelet projects the generated ConfigMap into flagd's volume, and every edit; deleting the FeatureFlag deletes it, and the kubelet keeps the last projection", func(ctx SpecContext) {
		ns := newNamespace(ctx, "file")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("checkout")}), app(ns, "web", optedIn))
		pod := injectedPod(ctx, ns, "web")
		cm := topology.ConfigMapName(topology.FlagSetKey(ns, "checkout"))
		Expect(pod.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", cm)))
		addr := flagdAddr(pod)
		serves(addr, "off")

		edited := time.Now()
		setVariant(ctx, ff, "on")
		AddReportEntry("file: edit to served", fmtDuration(serves(addr, "on").Sub(edited)))

		By("deleting the FeatureFlag")
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm}, &corev1.ConfigMap{})
		}).WithTimeout(deliveryTimeout).Should(Satisfy(apierrors.IsNotFound))
		Eventually(eventsAbout(ctx, ns, pod.Name)).WithTimeout(deliveryTimeout).Should(ContainElement(And(
			HaveField("Reason", "FailedMount"), HaveField("Note", ContainSubstring(`configmap "`+cm+`" not found`)))),
			"the real kubelet says it cannot refresh the volume")
		Consistently(resolve(addr)).WithTimeout(3*suiteSyncFrequency()+5*time.Second).WithPolling(poll).Should(Equal(evaluated("on")), "flagd serves the last projection")
	})

	It("kubernetes: flagd reads the FeatureFlag from the API server with the pod's own service account, under the Role flagplane grants; deleting the workload revokes it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "kubernetes")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		web := app(ns, "web", optedIn)
		web.Spec.Template.Spec.ServiceAccountName = "web"
		create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, ff,
			fixtures.Source(ns, "src", []v1beta1.Source{{Source: "checkout", Provider: v1beta1.SyncProviderKubernetes}}), web)
		pod := injectedPod(ctx, ns, "web")
		addr := flagdAddr(pod)
		serves(addr, "off")
		sa := "system:serviceaccount:" + ns + ":web"
		Expect(kubectl("auth", "can-i", "--as="+sa, "watch", "featureflags.core.openfeature.dev", "-n", ns)).To(ContainSubstring("yes"))

		edited := time.Now()
		setVariant(ctx, ff, "on")
		AddReportEntry("kubernetes: edit to served", fmtDuration(serves(addr, "on").Sub(edited)))

		By("deleting the workload")
		Expect(k8s.Delete(ctx, web)).To(Succeed())
		Eventually(func() ([]rbacv1.RoleBinding, error) {
			var list rbacv1.RoleBindingList
			err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "flagplane"})
			return list.Items, err
		}).WithTimeout(deliveryTimeout).Should(BeEmpty())
		Eventually(func() (string, error) {
			out, _ := cluster.Kubectl("auth", "can-i", "--as="+sa, "watch", "featureflags.core.openfeature.dev", "-n", ns)
			return out, nil
		}).WithTimeout(deliveryTimeout).Should(ContainSubstring("no"), "the API server no longer lets the account read flags")
	})

	It("flagd-proxy: flagd streams the flag set from flagplane's sync server through its Service, by DNS name; the FeatureFlag's status counts the stream, and drops it with the workload", func(ctx SpecContext) {
		ns := newNamespace(ctx, "proxy")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		web := app(ns, "web", optedIn)
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{{Source: "checkout", Provider: v1beta1.SyncProviderFlagdProxy}}), web)
		pod := injectedPod(ctx, ns, "web")
		Expect(sidecarArgs(pod)).To(ContainElement(ContainSubstring("flagplane-sync."+systemNS+".svc")), "flagd is sent to the Service by name")
		addr := flagdAddr(pod)
		serves(addr, "off")

		edited := time.Now()
		setVariant(ctx, ff, "on")
		AddReportEntry("flagd-proxy: edit to served", fmtDuration(serves(addr, "on").Sub(edited)))
		Eventually(streamsOf(ctx, ff)).WithTimeout(deliveryTimeout).Should(Equal(int32(1)))

		By("deleting the workload")
		Expect(k8s.Delete(ctx, web)).To(Succeed())
		Eventually(streamsOf(ctx, ff)).WithTimeout(deliveryTimeout).Should(BeZero(), "its stream ended with its pod")
	})

	It("Flagd: a standalone flagd behind its Service, reached by DNS name from other pods: over HTTP by a client, and by the OpenFeature Go SDK syncing in process; deleting the Flagd removes its Deployment and Service", func(ctx SpecContext) {
		ns := newNamespace(ctx, "flagd")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		flagd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-flagd"}}
		flagd.Spec.FeatureFlagSource = "src"
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("checkout")}), flagd)
		host := "shop-flagd." + ns + ".svc.cluster.local"

		By("a client pod evaluating over the Service's evaluation port, once a second")
		loop := fmt.Sprintf(`while true; do out=$(timeout 3 wget -q -O - --header 'Content-Type: application/json' --post-data '{"flagKey":%q,"context":{}}' http://%s:8013/flagd.evaluation.v1.Service/ResolveBoolean 2>&1) || out="no answer: $out"; echo "$out"; sleep 1; done`, flagKey, host)
		create(ctx, clientPod(ns, "curl", "default", loop))

		By("an application with the Go SDK, configured by an InProcessConfiguration to sync from the Service's sync port")
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sdk"}}
		ipc.Spec.Host, ipc.Spec.Port = host, 8015
		sdk := app(ns, "sdk", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "sdk"})
		sdk.Spec.Template.Spec.Containers[0].Image = realnode.SDKClientImage
		sdk.Spec.Template.Spec.Containers[0].Command = nil
		sdk.Spec.Template.Spec.Containers[0].Args = []string{"-from-env", "-flag", flagKey, "-type", "boolean"}
		create(ctx, ipc, sdk)

		Eventually(logsOf(ns, "curl", "client")).WithTimeout(podReadyTimeout).WithPolling(time.Second).
			Should(WithTransform(lastEvaluation, Equal(evaluated("off"))), func() string { return podReport(ctx, ns) })
		sdkPod := injectedPod(ctx, ns, "sdk")
		Expect(sdkPod.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "FLAGD_HOST", Value: host}))
		Eventually(logsOf(ns, sdkPod.Name, "app")).WithTimeout(deliveryTimeout).Should(WithTransform(lastEvaluation, Equal(evaluated("off"))))

		edited := time.Now()
		setVariant(ctx, ff, "on")
		Eventually(logsOf(ns, "curl", "client")).WithTimeout(deliveryTimeout).WithPolling(time.Second).
			Should(WithTransform(lastEvaluation, Equal(evaluated("on"))))
		AddReportEntry("Flagd over its Service: edit to served", fmtDuration(time.Since(edited)))
		Eventually(logsOf(ns, sdkPod.Name, "app")).WithTimeout(deliveryTimeout).Should(WithTransform(lastEvaluation, Equal(evaluated("on"))))

		By("deleting the Flagd")
		Expect(k8s.Delete(ctx, flagd)).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-flagd"}, &corev1.Service{})
		}).WithTimeout(deliveryTimeout).Should(Satisfy(apierrors.IsNotFound), "the Service")
		// Its endpoints, as kube-proxy reads them.
		Eventually(func() ([]discoveryv1.EndpointSlice, error) {
			var list discoveryv1.EndpointSliceList
			err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "shop-flagd"})
			return list.Items, err
		}).WithTimeout(deliveryTimeout).Should(BeEmpty(), "the Service's EndpointSlices")
		Eventually(logsOf(ns, "curl", "client")).WithTimeout(deliveryTimeout).WithPolling(time.Second).
			Should(WithTransform(lastLine, HavePrefix("no answer")),
				"the name no longer answers")
	})
})

// sidecarArgs is the injected flagd's command line.
func sidecarArgs(pod *corev1.Pod) []string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == "flagd" {
			return c.Args
		}
	}
	return nil
}

// streamsOf counts the sync server's open streams of a flag set, as its
// status reports them.
func streamsOf(ctx SpecContext, ff *v1beta1.FeatureFlag) func() (int32, error) {
	return func() (int32, error) {
		var cur v1beta1.FeatureFlag
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur); err != nil {
			return 0, err
		}
		var n int32
		for _, c := range cur.Status.Consumers {
			if c.Kind == "SyncSubscribers" {
				n += c.Streams
			}
		}
		return n, nil
	}
}

func eventsAbout(ctx SpecContext, ns, pod string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var about []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod {
				about = append(about, e)
			}
		}
		return about, nil
	}
}

func lastLine(logs string) string {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i] != "" {
			return lines[i]
		}
	}
	return ""
}
