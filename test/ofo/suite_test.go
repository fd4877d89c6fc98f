package ofo

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/format"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
)

func TestOpenFeatureOperatorScenarios(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "The OpenFeature Operator's e2e scenarios, on flagplane")
}

// flagdTag is the flagd release this suite installs flagplane with, for
// its sidecars and its Flagd kind: the release of the flagd binary the test
// node runs for flagd's image (bin/flagd, from hack/tools/flagd).
const flagdTag = "v0.16.0"

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
	op  *operator.Operator
	n   *node.Node
	// gatewayAPI installs Gateway API's CRDs, for the Flagd kind's
	// HTTPRoutes (flagd_test.go).
	gatewayAPI bool
)

// The cluster of every scenario: a control plane with kube-scheduler,
// flagplane's manager as installed (admission, and the built-in sync server
// that flagd-proxy sources sync from), and a test node that runs the pods.
var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())

	cp, err = controlplane.Start(ctx, controlplane.Options{
		Scheduler:             true,
		GatewayAPI:            gatewayAPI,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
		Log:                   GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	op, err = operator.Start(ctx, cp, operator.Options{PodAddress: podAddrs.PodAddress, SyncServer: true, Dir: GinkgoT().TempDir(),
		Configure: func(o *app.Options) {
			// --sidecar-tag and --flagd-tag, as an install would set them.
			o.Sidecar.Tag, o.Flagd.Tag = flagdTag, flagdTag
		}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })

	n, err = node.Start(ctx, cp, node.Options{Log: GinkgoWriter,
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	podAddrs.Set(n)
	// Registered last, so it runs first: the pods stop before the operator
	// and the control plane.
	DeferCleanup(func() { Expect(n.Stop()).To(Succeed()) })
	AddReportEntry("control plane start", cp.Timings)
}, NodeTimeout(5*time.Minute))

func init() {
	// Pods are long: failures say what matters with describe.
	format.MaxDepth = 4
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// podAddrs reaches the node's pods for the manager, whose ports are ports
// of this host.
var podAddrs node.Addresses
