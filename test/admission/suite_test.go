package admission

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/flagplane/flagplane/controllers"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows"
)

func TestAdmission(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission")
}

// operatorNamespace holds the webhook certificate Secret.
const operatorNamespace = "flagplane-system"

var (
	cp       *controlplane.ControlPlane
	k8s      client.Client
	operator *runningOperator
)

// runningOperator is the manager with flagplane's controllers and
// admission, run in the test process.
type runningOperator struct {
	admission  *webhooks.Admission
	configMaps *recordingConfigMaps
	cancel     context.CancelFunc
	done       chan struct{}
}

func startOperator() *runningOperator {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	wio := cp.Env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Scheme,
		Cache:                  controllers.CacheOptions(cache.Options{}, workflows.GeneratedMetadata{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort}),
		Logger:                 zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)),
	})
	Expect(err).NotTo(HaveOccurred())
	opts := webhooks.DefaultOptions()
	opts.Namespace = operatorNamespace
	// The API server reaches the webhook by URL, at envtest's address.
	opts.ExtraDNSNames = []string{wio.LocalServingHost, "localhost"}
	opts.Injection.SyncServer = "flagplane-sync.flagplane-system.svc:8015"
	// Sources may relax the sidecar's securityContext here (off by default;
	// test/security shows that).
	opts.Injection.AllowSecurityContextOverride = true
	// No periodic resync within a run: healing follows Deltas and pod
	// events (and one resync when the healer starts).
	opts.HealResync = time.Hour
	opts.HealBackoff = 10 * time.Second
	// The controllers roll workloads out by what the webhook injects.
	settings := workflows.DefaultSettings()
	settings.Injection = opts.Injection
	opts.FlagSets = settings.FlagSets
	c, err := controllers.New(ctx, mgr, controllers.Options{Settings: &settings})
	Expect(err).NotTo(HaveOccurred())
	a, err := webhooks.Setup(ctx, mgr, c, opts)
	Expect(err).NotTo(HaveOccurred())
	c.AddHealer(a.Healer, a.Healer.Resync, a.Healer.Workers)
	rec := &recordingConfigMaps{next: a.PodMutator.ConfigMaps}
	a.PodMutator.ConfigMaps = rec
	op := &runningOperator{admission: a, configMaps: rec, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(c.Ready, 30*time.Second, 50*time.Millisecond).Should(BeTrue(), "operator never became ready")
	Eventually(func() error { return a.Certificates.ReadyCheck(nil) }, 30*time.Second).Should(Succeed())
	// The API server trusts the webhook once it has read the injected CA
	// bundle: a dry-run create goes through the (failurePolicy Fail)
	// FeatureFlag validator then.
	Eventually(func() error {
		return k8s.Create(context.Background(), flagSet(operatorNamespace, "probe"), client.DryRunAll)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "the API server never reached the webhook")
	return op
}

func (o *runningOperator) stop() {
	o.cancel()
	Eventually(o.done, 30*time.Second).Should(BeClosed())
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	cp, err = controlplane.Start(ctx, controlplane.Options{
		Log: GinkgoWriter,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook")},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	AddReportEntry("control plane start", cp.Timings)
	k8s = cp.Client
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})).To(Succeed())
	operator = startOperator()
	DeferCleanup(func() { operator.stop() })
}, NodeTimeout(10*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}
