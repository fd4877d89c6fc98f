package reconcile

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/controllers"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/workflows"
)

func TestReconcile(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Reconciliation")
}

var (
	cp       *controlplane.ControlPlane
	k8s      client.Client
	operator *runningOperator
)

// runningOperator is the manager with flagplane's controllers, run in the
// test process against the control plane.
type runningOperator struct {
	controller *controllers.Controller
	cancel     context.CancelFunc
	done       chan struct{}
}

func startOperator() *runningOperator {
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Scheme,
		Cache:                  controllers.CacheOptions(cache.Options{}, workflows.GeneratedMetadata{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)),
	})
	Expect(err).NotTo(HaveOccurred())
	c, err := controllers.New(ctx, mgr, controllers.Options{})
	Expect(err).NotTo(HaveOccurred())
	op := &runningOperator{controller: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(c.Ready, 30*time.Second, 50*time.Millisecond).Should(BeTrue(), "operator never became ready")
	return op
}

func (o *runningOperator) stop() {
	o.cancel()
	Eventually(o.done, 30*time.Second).Should(BeClosed())
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{
		GatewayAPI: true,
		Log:        GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client
	operator = startOperator()
	DeferCleanup(func() { operator.stop() })
}, NodeTimeout(10*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
}
