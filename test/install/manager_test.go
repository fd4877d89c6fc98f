package install

import (
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

// The manager, run in the test process but with exactly the RBAC that
// config/default gives its ServiceAccount (it impersonates it), does its whole
// job: a missing permission shows up here as a manager that never gets ready,
// a ConfigMap that never appears or a status that is never written.
var _ = Describe("the manager with the RBAC of config/default", Ordered, func() {
	var (
		mgr       *runningManager
		metricsIP string
		ipErr     error
		shop      string
	)

	BeforeAll(func(ctx SpecContext) {
		installDefault()
		metricsIP, ipErr = externalIP()
		if ipErr != nil {
			metricsIP = "127.0.0.1"
		}
		opts := app.DefaultOptions()
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = systemNS
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

	It("reconciles the samples: the ConfigMap, and status on the flag set and the source", func(ctx SpecContext) {
		kubectl("apply", "-k", filepath.Join(rootDir, "config", "samples"), "-n", shop)
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
		standby := startManager(impersonating(systemNS, managerSA), "127.0.0.1", opts)
		Eventually(httpStatus("http://" + standby.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
		Expect(standby.Controller.Ready()).To(BeFalse(), "only the leader runs the first reconciliation pass")
		Consistently(standby.Elected(), "2s").ShouldNot(BeClosed())
		Expect(standby.Controller.Topology().Snapshot().Counts()[topology.KindFlagSet]).To(BeNumerically(">", 0))
	})
})

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
