package realinstall

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/realnode"
)

const managerSA = "system:serviceaccount:" + systemNS + ":flagplane-manager"

var _ = Describe("the chart installed on a real node", Ordered, func() {
	It("runs two manager replicas from the chart's image, under the shipped service account, one of them leader", func(ctx SpecContext) {
		pods := waitForManagers(ctx, 2)
		for _, p := range pods {
			Expect(p.Spec.NodeName).To(Equal(cluster.NodeName))
			Expect(p.Spec.ServiceAccountName).To(Equal("flagplane-manager"))
			Expect(p.Spec.Containers[0].Image).To(Equal(currentImage), "the chart's default image reference (or the upgrade's)")
			Expect(p.Status.ContainerStatuses[0].ImageID).To(ContainSubstring("sha256:"), "pulled by containerd from the registry")
		}
		var lease coordinationv1.Lease
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane.core.openfeature.dev"}, &lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			g.Expect(*lease.Spec.HolderIdentity).To(Or(HavePrefix(pods[0].Name), HavePrefix(pods[1].Name)))
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	It("confines the manager by the shipped RBAC and admission policy, as the API server enforces them", func(ctx SpecContext) {
		// The API server's own authorization, asked for the manager's account.
		for _, verbResource := range [][]string{
			{"create", "clusterrolebindings"}, {"get", "secrets", "-n", "kube-system"}, {"create", "pods", "-n", "default"},
			{"delete", "nodes"}, {"escalate", "clusterroles"},
		} {
			out, _ := cluster.Kubectl(append([]string{"auth", "can-i", "--as=" + managerSA}, verbResource...)...)
			Expect(strings.TrimSpace(out)).To(Equal("no"), "the manager may not %v", verbResource)
		}
		Expect(strings.TrimSpace(kubectl("auth", "can-i", "--as="+managerSA, "create", "configmaps", "-n", "default"))).To(Equal("yes"),
			"the control: it may write the ConfigMaps it generates")

		var policies admissionregistrationv1.ValidatingAdmissionPolicyList
		Expect(k8s.List(ctx, &policies)).To(Succeed())
		Expect(policies.Items).NotTo(BeEmpty(), "the chart installs its admission policy")
		By("a write RBAC allows but the admission policy forbids, as the manager")
		ns := newNamespace(ctx, "policy")
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-generated"}, Data: map[string]string{"k": "v"}}
		out, err := cluster.KubectlWithInput(strings.NewReader(mustYAML(cm)), "create", "--as="+managerSA, "-f", "-")
		Expect(err).To(HaveOccurred(), "the manager may create only the ConfigMaps it labels as generated: %s", out)
		Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy"))
		By("the control: the ConfigMap the manager generates, labelled and named as generated")
		cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "flagplane"}
		cm.Name = "flagd." + ns + ".checkout"
		out, err = cluster.KubectlWithInput(strings.NewReader(mustYAML(cm)), "create", "--dry-run=server", "--as="+managerSA, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), "the same request for a generated ConfigMap is admitted: %s", out)
	})

	It("answers admission through its webhook Service: it refuses an invalid flag set and injects flagd into an opted-in pod", func(ctx SpecContext) {
		var webhooks admissionregistrationv1.ValidatingWebhookConfigurationList
		Expect(k8s.List(ctx, &webhooks)).To(Succeed())
		var ours int
		for _, w := range webhooks.Items {
			for _, h := range w.Webhooks {
				if h.ClientConfig.Service != nil && h.ClientConfig.Service.Namespace == systemNS {
					Expect(h.ClientConfig.URL).To(BeNil())
					Expect(h.ClientConfig.Service.Name).To(Equal("flagplane-webhook"))
					ours++
				}
			}
		}
		Expect(ours).To(BeNumerically(">", 0))

		ns := newNamespace(ctx, "admission")
		bad := fixtures.FlagSet(ns, "bad", "missing-variant")
		err := k8s.Create(ctx, bad)
		Expect(err).To(HaveOccurred(), "the validating webhook refuses a default variant that is not a variant")
		Expect(err.Error()).To(ContainSubstring("missing-variant"))

		ff := fixtures.FlagSet(ns, "flags", "off")
		create(ctx, ff, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")}),
			app(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}))
		pod := injectedPod(ctx, ns, "web")
		Expect(pod.Spec.InitContainers).To(ContainElement(And(HaveField("Name", "flagd"), HaveField("RestartPolicy", ptr.To(corev1.ContainerRestartPolicyAlways)))),
			"flagd injected as a native sidecar, and run by the kubelet")
	})

	It("serves its metrics through the metrics Service to a caller whose token may read them, and to no other", func(ctx SpecContext) {
		ns := newNamespace(ctx, "metrics")
		for _, sa := range []string{"scraper", "stranger"} {
			create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
		}
		create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "flagplane-metrics-scraper-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flagplane-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}},
		})
		// The caller is this machine, on the cluster's network: the name
		// resolved by the cluster DNS, the Service reached through
		// kube-proxy, the token one the API server issued for the account.
		url := "https://flagplane-metrics." + systemNS + ".svc.cluster.local:8443/metrics"
		scrape := func(sa string) func() (string, error) {
			return func() (string, error) {
				token := strings.TrimSpace(kubectl("create", "token", sa, "-n", ns))
				return httpsGet(ctx, url, token)
			}
		}
		Eventually(scrape("scraper")).WithTimeout(time.Minute).Should(And(
			ContainSubstring("200 OK"), ContainSubstring("flagplane_api_requests_total")))
		Eventually(scrape("stranger")).WithTimeout(time.Minute).Should(And(
			ContainSubstring("403"), Not(ContainSubstring("flagplane_api_requests_total"))))
	})
})

var _ = Describe("the managers' logs on a real node", func() {
	It("have no status write refused with a conflict while Flagds, sources and flag sets are created and edited", func(ctx SpecContext) {
		ns := newNamespace(ctx, "writers")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("checkout"), {Source: "checkout", Provider: v1beta1.SyncProviderKubernetes}})
		flagd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-flagd"}}
		flagd.Spec.FeatureFlagSource = "src"
		before := conflictsLogged()
		create(ctx, ff, src, flagd, app(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}))
		injectedPod(ctx, ns, "web")
		for i, variant := range []string{"on", "off", "on", "off", "on"} {
			setVariant(ctx, ff, variant)
			Eventually(func(g Gomega) {
				var cur v1beta1.Flagd
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(flagd), &cur)).To(Succeed())
				g.Expect(cur.Status.Conditions).To(ContainElement(And(HaveField("Type", "Programmed"), HaveField("Status", metav1.ConditionTrue))))
			}).WithTimeout(deliveryTimeout).Should(Succeed(), "edit %d", i)
		}
		// A status that two workflows write is refused to the slower one.
		Consistently(conflictsLogged).WithTimeout(5 * time.Second).Should(HaveLen(len(before)))

		By("kubectl wait and kstatus read the health the installed manager writes")
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=2m", "featureflag/checkout", "featureflagsource/src", "flagd/shop-flagd")
		for _, obj := range []client.Object{ff, src, flagd} {
			Expect(fixtures.KStatus(ctx, k8s, k8s.Scheme(), obj)).To(HavePrefix("Current: "), "%T %s", obj, obj.GetName())
		}
	})
})

var _ = Describe("a workload applied before its source, on a real node", func() {
	It("is rolled so that its pods get flagd, and its Events say why: the pods came before the source, not past a webhook that was down", func(ctx SpecContext) {
		ns := newNamespace(ctx, "order")
		web := app(ns, "web", nil)
		create(ctx, fixtures.FlagSet(ns, "checkout", "off"), web)
		first := readyPod(ctx, ns, "web")
		Expect(first.Spec.InitContainers).To(BeEmpty(), "nothing targets it yet")
		create(ctx, fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("checkout")}, fixtures.Targeting("Deployment", "web")))
		Eventually(func(g Gomega) {
			pod := injectedPod(ctx, ns, "web")
			g.Expect(pod.Name).NotTo(Equal(first.Name), "the workload was rolled")
			g.Expect(pod.Spec.InitContainers).To(ContainElement(HaveField("Name", "flagd")))
		}).WithTimeout(podReadyTimeout).Should(Succeed())
		var events []string
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			events = nil
			for _, e := range list.Items {
				if e.Regarding.Kind == "Deployment" && e.Regarding.Name == "web" {
					events = append(events, e.Reason+": "+e.Note)
				}
			}
			g.Expect(events).To(ContainElement(HavePrefix("Targeted: ")))
		}).WithTimeout(deliveryTimeout).Should(Succeed())
		Expect(events).NotTo(ContainElement(HavePrefix("InjectionMissing")), "both webhook replicas were up: %v", events)
	})
})

// conflictsLogged counts the writes the API server refused with a
// Conflict that the managers running now logged as reconcile errors.
func conflictsLogged() []string {
	out, _ := cluster.Kubectl("logs", "-n", systemNS, "-l", "app.kubernetes.io/name=flagplane", "--tail=-1")
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Reconciler error") && strings.Contains(l, "the object has been modified") {
			found = append(found, l)
		}
	}
	return found
}

// clientPod runs script once in a busybox container named client, as
// service account sa.
func clientPod(ns, name, sa, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: realnode.BusyboxImage, Command: []string{"sh", "-c", script},
			}},
		},
	}
}

func mustYAML(obj any) string {
	GinkgoHelper()
	data, err := yaml.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// httpsGet GETs url with a bearer token, resolving its host with the
// cluster's DNS, and returns the status line and the body.
func httpsGet(ctx context.Context, url, token string) (string, error) {
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(cluster.DNSIP.String(), "53"))
	}}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{Resolver: resolver}).DialContext,
		// The manager's serving certificate is its own; what is checked
		// here is who may read, not who serves.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.Status + "\n" + string(body), err
}
