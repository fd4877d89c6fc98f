package install

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// describeManager runs the manager in the test process but with exactly
// the RBAC that config/default gives its ServiceAccount (it impersonates it),
// admission included: a missing permission shows up here as a manager that
// never gets ready, a ConfigMap that never appears, a status never written or
// a Pod without its sidecar.
func describeManager() {
	var (
		mgr       *runningManager
		metricsIP string
		ipErr     error
		shop      string
	)

	BeforeAll(func(ctx SpecContext) {
		metricsIP, ipErr = externalIP()
		if ipErr != nil {
			metricsIP = "127.0.0.1"
		}
		// The Pods of the manager Deployment never run here (no kubelet), and
		// the API server reaches a webhook Service through its ClusterIP,
		// which nothing routes: the installed webhook configurations are
		// pointed at this process by URL instead. Everything else about
		// them, the caBundle the manager injects included, is as installed.
		webhookAddr := freeAddress("127.0.0.1")
		repointWebhooks(ctx, "https://"+webhookAddr)
		DeferCleanup(func() {
			// A later section installs no webhook: these must not outlive this one.
			kubectl("delete", "mutatingwebhookconfiguration", "flagplane-injector")
			kubectl("delete", "validatingwebhookconfiguration", "flagplane-validator")
		})
		host, port, err := net.SplitHostPort(webhookAddr)
		Expect(err).NotTo(HaveOccurred())
		opts := app.DefaultOptions()
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = systemNS
		opts.WebhookHost = host
		opts.WebhookPort, err = strconv.Atoi(port)
		Expect(err).NotTo(HaveOccurred())
		opts.Admission.Namespace = systemNS
		opts.Admission.ExtraDNSNames = []string{host}
		mgr = startManager(impersonating(systemNS, managerSA), metricsIP, opts)
		shop = newNamespace(ctx, "shop")
	})

	It("becomes ready once its topology is built, and is elected leader", func(ctx SpecContext) {
		Eventually(httpStatus("http://" + mgr.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
		Expect(httpStatus("http://" + mgr.probeAddr + "/healthz")()).To(Equal(http.StatusOK))
		Eventually(mgr.Elected()).Should(BeClosed())
		lease := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane.core.openfeature.dev"}, lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty())
	})

	It("keeps its webhook certificate and injects the caBundle, so that the API server calls its validators", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			secret := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-webhook-cert"}, secret)).To(Succeed())
			g.Expect(secret.Data).To(HaveKey("tls.crt"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-validator"}, v)).To(Succeed())
			for _, w := range v.Webhooks {
				g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), w.Name)
			}
		}).Should(Succeed())
		// An invalid flag set is refused by the validator, with its reason.
		bad := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "bad"}}
		bad.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
			"f": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "maybe"},
		}
		Eventually(func() error { return k8s.Create(ctx, bad, client.DryRunAll) }).Should(
			MatchError(And(ContainSubstring("admission webhook"), ContainSubstring("maybe"))))
	})

	It("reconciles the samples: the ConfigMap, status on the flag set and the source, and flagd injected into the Pods", func(ctx SpecContext) {
		samples := filepath.Join(rootDir, "config", "samples")
		// The source first, so that the first Pod is admitted with it in the graph.
		kubectl("apply", "-n", shop, "-f", filepath.Join(samples, "featureflag.yaml"), "-f", filepath.Join(samples, "featureflagsource.yaml"))
		Eventually(func() bool {
			_, ok := mgr.Controller.Topology().Snapshot().Source(topology.SourceKey(shop, "shop"))
			return ok
		}).Should(BeTrue())
		kubectl("apply", "-n", shop, "-f", filepath.Join(samples, "deployment.yaml"))

		flags := topology.FlagSetKey(shop, "shop-flags")
		Eventually(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: topology.ConfigMapName(flags)}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue(workflows.ConfigMapDataKey(flags), ContainSubstring(`"new-checkout"`)))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			s := &v1beta1.FeatureFlagSource{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop"}, s)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "%+v", s.Status.Conditions)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			ff := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flags"}, ff)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionAccepted)).To(BeTrue(), "%+v", ff.Status.Conditions)
		}).Should(Succeed())
		// The ReplicaSet controller's Pod went through the installed
		// MutatingWebhookConfiguration: flagd as a native sidecar, with the
		// manager's default sidecar image.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(shop), client.MatchingLabels{"app": "shop-web"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			g.Expect(pods.Items[0].Spec.InitContainers).To(ContainElement(And(
				HaveField("Name", workflows.SidecarName),
				HaveField("Image", app.DefaultOptions().Sidecar.ImageReference()),
				HaveField("RestartPolicy", HaveValue(Equal(corev1.ContainerRestartPolicyAlways))),
			)))
		}).Should(Succeed())
	})

	It("grants a workload of the kubernetes provider a Role on its FeatureFlag only, without escalate or bind", func(ctx SpecContext) {
		ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "watched-flags"}}
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
			"dark-mode": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"},
		}
		labels := map[string]string{"app": "reader"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "reader"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{ServiceAccountName: "reader",
						Containers: []corev1.Container{{Name: "app", Image: "app"}}},
				},
			},
		}
		src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "watcher"}}
		src.Spec.Sources = []v1beta1.Source{{Source: "watched-flags", Provider: v1beta1.SyncProviderKubernetes}}
		src.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "reader"}}
		for _, o := range []client.Object{ff, d, src} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}
		name := workflows.RBACName(topology.WorkloadKey(topology.KindDeployment, shop, "reader"))
		Eventually(func(g Gomega) {
			role := &rbacv1.Role{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: name}, role)).To(Succeed())
			g.Expect(role.Rules).To(ConsistOf(HaveField("ResourceNames", ConsistOf("watched-flags"))))
			rb := &rbacv1.RoleBinding{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: name}, rb)).To(Succeed())
			g.Expect(rb.Subjects).To(ConsistOf(HaveField("Name", "reader")))
		}).Should(Succeed())
		Expect(canI(serviceAccount(shop, "reader"), "get", "featureflags.core.openfeature.dev/watched-flags", "-n", shop)).To(BeTrue())
		Expect(canI(serviceAccount(shop, "reader"), "get", "featureflags.core.openfeature.dev/shop-flags", "-n", shop)).To(BeFalse())
	})

	It("serves Prometheus metrics: events, deltas, reconcile latency, writes, graph nodes, queue depth", func() {
		Eventually(httpBody("http://" + mgr.metricsAddr + "/metrics")).Should(And(
			ContainSubstring(`flagplane_events_total{event="created",kind="FeatureFlag"}`),
			ContainSubstring(`flagplane_delta_size_count`),
			ContainSubstring(`flagplane_reconcile_duration_seconds_bucket{result="success",workflow="configmaps"`),
			ContainSubstring(`flagplane_writes_total{kind="ConfigMap"`),
			MatchRegexp(`flagplane_topology_nodes\{kind="FeatureFlag"\} [1-9]`),
			MatchRegexp(`flagplane_topology_nodes\{kind="Deployment"\} [1-9]`),
			ContainSubstring(`workqueue_depth{controller="configmaps",name="configmaps"`),
			ContainSubstring(`leader_election_master_status{name="flagplane.core.openfeature.dev"} 1`),
		))
	})

	It("serves its topology as Graphviz DOT at /debug/topology", func() {
		resp, err := http.Get("http://" + mgr.metricsAddr + app.TopologyPath)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/vnd.graphviz"))
		Expect(resp.Header.Get("Flagplane-Topology-Built")).To(Equal("true"))
		Expect(string(body)).To(HavePrefix("digraph topology {"))
		Expect(string(body)).To(ContainSubstring(fmt.Sprintf(`"featureflagsource:%s/shop" -> "deployment:%s/shop-web"`, shop, shop)))
	})

	It("has its topology dumped by `flagplane topology --kubeconfig`, through the API server's service proxy", func(ctx SpecContext) {
		if ipErr != nil {
			Skip("the service proxy forwards only to non-loopback addresses and this machine has none: " + ipErr.Error())
		}
		// The manager's Pods never run here (no kubelet). One of them is
		// given the address of the manager of this test process, and
		// flagplane-metrics an EndpointSlice to it, as the kubelet and the
		// EndpointSlice controller would do: the API server proxies only to
		// the address of a Pod that a Service's endpoint refers to.
		host, portStr, err := net.SplitHostPort(mgr.metricsAddr)
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(portStr)
		Expect(err).NotTo(HaveOccurred())
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(systemNS),
			client.MatchingLabels{"app.kubernetes.io/name": "flagplane", "app.kubernetes.io/component": "manager"})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		pod := &pods.Items[0]
		pod.Status.PodIP, pod.Status.PodIPs = host, []corev1.PodIP{{IP: host}}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "flagplane-metrics-test",
				Labels: map[string]string{discoveryv1.LabelServiceName: "flagplane-metrics", discoveryv1.LabelManagedBy: "flagplane-install-suite"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{host},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: systemNS, Name: pod.Name, UID: pod.UID},
			}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To(int32(port))}},
		}
		Expect(k8s.Create(ctx, slice)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, slice))).To(Succeed()) })

		out := filepath.Join(GinkgoT().TempDir(), "topology.dot")
		Eventually(func() error {
			// The default --service is config/default's flagplane-metrics.
			cmd := exec.CommandContext(ctx, cliPath, "topology", "--kubeconfig", cp.KubeconfigPath, "-o", out)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, b)
			}
			return nil
		}).Should(Succeed())
		dot, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(dot)).To(ContainSubstring(fmt.Sprintf(`"featureflagsource:%s/shop" -> "deployment:%s/shop-web"`, shop, shop)))

		if _, err := exec.LookPath("dot"); err == nil {
			svg := filepath.Join(GinkgoT().TempDir(), "topology.svg")
			b, err := exec.CommandContext(ctx, cliPath, "topology", "--kubeconfig", cp.KubeconfigPath,
				"--service", systemNS+"/flagplane-metrics:8080", "--format", "svg", "-o", svg).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", b)
			Expect(os.ReadFile(svg)).To(ContainSubstring("<svg"))
		}
	})

	It("has a standby replica that is ready, with its graph built, while not the leader", func() {
		opts := app.DefaultOptions()
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = systemNS
		opts.Registry = prometheus.NewRegistry() // the leader's metrics own the process-wide registry
		opts.WebhookHost, opts.Admission.ExtraDNSNames = "127.0.0.1", []string{"127.0.0.1"}
		opts.WebhookPort = freePort()
		standby := startManager(impersonating(systemNS, managerSA), "127.0.0.1", opts)
		Eventually(httpStatus("http://" + standby.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
		Expect(standby.Controller.Ready()).To(BeFalse(), "only the leader runs the first reconciliation pass")
		Consistently(standby.Elected(), "2s").ShouldNot(BeClosed())
		Expect(standby.Controller.Topology().Snapshot().Counts()[topology.KindFlagSet]).To(BeNumerically(">", 0))
	})
}

// repointWebhooks points every webhook of the installed configurations at
// base (https://host:port) by URL, keeping each one's path.
func repointWebhooks(ctx context.Context, base string) {
	GinkgoHelper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-injector"}, m)).To(Succeed())
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = urlOf(base, m.Webhooks[i].ClientConfig)
	}
	Expect(k8s.Update(ctx, m)).To(Succeed())
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-validator"}, v)).To(Succeed())
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = urlOf(base, v.Webhooks[i].ClientConfig)
	}
	Expect(k8s.Update(ctx, v)).To(Succeed())
}

func urlOf(base string, c admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	Expect(c.Service).NotTo(BeNil(), "config/webhook reaches the manager through its Service")
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + ptr.Deref(c.Service.Path, "/"))}
}

// httpStatus GETs url and returns the status code (0 when it cannot connect).
func httpStatus(url string) func() int {
	return func() int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
}

// httpBody GETs url and returns the body of a 200 answer.
func httpBody(url string) func() (string, error) {
	return func() (string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", url, resp.Status)
		}
		return string(b), nil
	}
}
