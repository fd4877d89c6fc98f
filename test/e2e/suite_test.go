package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	uberzap "go.uber.org/zap"

	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End to end: every delivery path through the test node")
}

var (
	w   *world
	k8s client.Client
	n   *node.Node
	op  *operator.Operator
)

var _ = BeforeSuite(func(ctx SpecContext) {
	// The manager's lines go to the spec's output, and as JSON, as the
	// manager writes them in a cluster, to managerLogs (logs_test.go).
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true), zap.RawZapOpts(uberzap.WrapCore(managerLogs.tee))))
	var err error
	w, err = startWorld(ctx, GinkgoWriter, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(w.stop()).To(Succeed()) })
	k8s, n, op = w.cp.Client, w.node, w.op
}, NodeTimeout(5*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	// What does not happen is shown for long enough for flagd to have
	// acted: its file watch and gRPC streams act within milliseconds, the
	// http provider polls every second here.
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}
