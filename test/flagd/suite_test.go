package flagd

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
)

func TestFlagd(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Flagd: standalone flagd, served from the topology")
}

var (
	root string
	cp   *controlplane.ControlPlane
	k8s  client.Client
	op   *operator.Operator
	n    *node.Node
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	cp, err = controlplane.Start(ctx, controlplane.Options{
		RootDir: root, Scheduler: true, GatewayAPI: true, Log: GinkgoWriter,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	op, err = operator.Start(ctx, cp, operator.Options{PodAddress: podAddrs.PodAddress, SyncServer: true, Dir: GinkgoT().TempDir(),
		Configure: func(o *app.Options) { o.GatewayAPIPoll = 200 * time.Millisecond }})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })

	n, err = node.Start(ctx, cp, node.Options{Log: GinkgoWriter,
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	podAddrs.Set(n)
	// Registered last, so it runs first: the pods' processes stop before
	// the operator and the control plane.
	DeferCleanup(func() { Expect(n.Stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(45 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// podAddrs reaches the node's pods for the manager, whose ports are ports
// of this host.
var podAddrs node.Addresses
