package install

import (
	"context"
	"flag"
	"net/http"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// An installed manager is run in the test process, since no Pod runs here
// (no kubelet): with the arguments of its installed Deployment, exactly as
// its container would parse them, and the RBAC of its ServiceAccount
// (impersonated). What a Pod has and a process has not is given to it:
// the addresses it listens on (loopback, on ports it picks and reports), its namespace (the Pod's
// POD_NAMESPACE), a certificate directory for what a mounted Secret holds.

// installedArgs are the manager container's arguments of the Deployment
// flagplane-manager in ns, with $(POD_NAMESPACE) expanded as the kubelet does.
func installedArgs(ctx context.Context, ns string) []string {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagplane-manager"}, d)).To(Succeed())
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", ns))
	}
	return args
}

// optionsFromArgs parses the manager's command line as cmd/manager does.
func optionsFromArgs(args []string) app.Options {
	GinkgoHelper()
	opts := app.DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	opts.BindFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	Expect(fs.Parse(args)).To(Succeed(), "the installed arguments are the manager's flags: %v", args)
	Expect(fs.Args()).To(BeEmpty())
	return opts
}

// installedManager is a manager run from the installed Deployment of ns.
type installedManager struct {
	*runningManager
	ns          string
	webhookBase string // https://host:port of its webhook server
}

// runInstalled starts the manager of the Deployment in ns, impersonating
// its ServiceAccount. adjust may change the options after the arguments are
// parsed (e.g. a certificate directory).
func runInstalled(ctx context.Context, ns string, adjust func(*app.Options)) *installedManager {
	GinkgoHelper()
	opts := optionsFromArgs(installedArgs(ctx, ns))
	// Ports the manager picks and reports (port 0).
	opts.WebhookHost, opts.WebhookPort = "127.0.0.1", 0
	// A Pod's namespace, which in a Pod comes from POD_NAMESPACE and the
	// service account mount.
	opts.LeaderElectionNamespace = ns
	opts.Admission.Namespace = ns
	opts.Admission.ExtraDNSNames = []string{opts.WebhookHost}
	if opts.Sync.Enabled() {
		opts.Sync.BindAddress = "127.0.0.1:0"
		opts.Sync.SecretNamespace = ns
	}
	opts.Registry = newRegistry()
	if adjust != nil {
		adjust(&opts)
	}
	m := startManager(impersonating(ns, managerSA), "127.0.0.1", opts)
	webhook := m.Addresses().Webhook
	Expect(webhook).NotTo(BeEmpty(), "the webhook server listens once the manager is built")
	return &installedManager{runningManager: m, ns: ns, webhookBase: "https://" + webhook}
}

// pointWebhooksAt points every webhook of the named configurations at base
// by URL, keeping their paths: the API server cannot reach a Service here.
// It waits until the API server has the change.
func pointWebhooksAt(ctx context.Context, base, mutating, validating string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: mutating}, m)).To(Succeed())
		for i := range m.Webhooks {
			m.Webhooks[i].ClientConfig = webhookURL(base, m.Webhooks[i].ClientConfig)
		}
		g.Expect(k8s.Update(ctx, m)).To(Succeed())
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: validating}, v)).To(Succeed())
		for i := range v.Webhooks {
			v.Webhooks[i].ClientConfig = webhookURL(base, v.Webhooks[i].ClientConfig)
		}
		g.Expect(k8s.Update(ctx, v)).To(Succeed())
	}).Should(Succeed())
}

// webhookURL is c pointed at base by URL (c's caBundle kept).
func webhookURL(base string, c admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	path := "/"
	switch {
	case c.Service != nil:
		path = ptr.Deref(c.Service.Path, "/")
	case c.URL != nil:
		if i := strings.Index(strings.TrimPrefix(*c.URL, "https://"), "/"); i >= 0 {
			path = strings.TrimPrefix(*c.URL, "https://")[i:]
		}
	}
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path), CABundle: c.CABundle}
}

// expectServing checks what every install must do once its manager runs:
// ready (graph built, webhook certificate served) and elected; the caBundle
// of its webhook configurations trusted by the API server, so that its
// validator refuses an invalid flag set; config/samples reconciled in ns
// (ConfigMap, status); and flagd injected into the Pod the ReplicaSet
// controller creates there.
func expectServing(ctx context.Context, m *installedManager, validating, ns string) {
	GinkgoHelper()
	Eventually(httpStatus("http://" + m.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
	Eventually(m.Elected()).Should(BeClosed())
	Eventually(func(g Gomega) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: validating}, v)).To(Succeed())
		for _, w := range v.Webhooks {
			g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), w.Name)
		}
	}).Should(Succeed())
	bad := &v1beta1.FeatureFlag{}
	bad.Namespace, bad.Name = ns, "bad"
	bad.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"f": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "maybe"},
	}
	Eventually(func() error { return k8s.Create(ctx, bad, client.DryRunAll) }).Should(
		MatchError(And(ContainSubstring("admission webhook"), ContainSubstring("maybe"))))

	samples := filepath.Join(rootDir, "config", "samples")
	kubectl("apply", "-n", ns, "-f", filepath.Join(samples, "featureflag.yaml"), "-f", filepath.Join(samples, "featureflagsource.yaml"))
	Eventually(func() bool {
		_, ok := m.Controller.Topology().Snapshot().Source(topology.SourceKey(ns, "shop"))
		return ok
	}).Should(BeTrue())
	kubectl("apply", "-n", ns, "-f", filepath.Join(samples, "deployment.yaml"))
	flags := topology.FlagSetKey(ns, "shop-flags")
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(flags)}, &corev1.ConfigMap{})
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		s := &v1beta1.FeatureFlagSource{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, s)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "%+v", s.Status.Conditions)
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "shop-web"})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		g.Expect(pods.Items[0].Spec.InitContainers).To(ContainElement(HaveField("Name", injection.SidecarName)))
	}).Should(Succeed())
}
