package sizes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
)

func TestSizes(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sizes: a flag set too large for its delivery mode is refused or reported up front")
}

var (
	root string
	cp   *controlplane.ControlPlane
	k8s  client.Client
	op   *operator.Operator
	n    *node.Node
	// flagdBinary is the real flagd that the node runs for sidecars.
	flagdBinary string
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	flagdBinary = filepath.Join(root, "bin", "flagd")
	_, err = os.Stat(flagdBinary)
	Expect(err).NotTo(HaveOccurred(), "bin/flagd missing: run `make realclients`")

	cp, err = controlplane.Start(ctx, controlplane.Options{
		RootDir: root, Scheduler: true, Log: GinkgoWriter,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	op, err = operator.Start(ctx, cp, operator.Options{PodAddress: podAddrs.PodAddress, SyncServer: true, Dir: GinkgoT().TempDir()})
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
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// podAddrs reaches the node's pods for the manager, whose ports are ports
// of this host.
var podAddrs node.Addresses
