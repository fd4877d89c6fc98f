package accounting

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestAccounting(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "API-call accounting")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
)

// resyncPeriod makes the informers deliver every object again about every
// second, all through the suite: each count below covers resyncs too.
// (client-go jitters it down by up to 10 % and refuses less than a second.)
const resyncPeriod = 1200 * time.Millisecond

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{GatewayAPI: true, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client
}, NodeTimeout(5*time.Minute))

// manager is the manager of cmd/manager/app, run in the test process
// without admission (nothing here creates Pods), with a registry of its own.
type manager struct {
	*operator.Operator
	registry *prometheus.Registry
}

func startManager(ctx context.Context) *manager {
	GinkgoHelper()
	registry := prometheus.NewRegistry()
	op, err := operator.Start(ctx, cp, operator.Options{Configure: func(o *app.Options) {
		o.Webhooks = false
		o.Registry = registry
		o.CacheSyncPeriod = resyncPeriod
	}})
	Expect(err).NotTo(HaveOccurred())
	return &manager{Operator: op, registry: registry}
}

func (m *manager) stop() {
	GinkgoHelper()
	Expect(m.Stop()).To(Succeed())
}

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
}
