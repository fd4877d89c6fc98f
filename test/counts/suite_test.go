package counts

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
)

func TestCounts(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Counts and lengths at the edges")
}

var (
	w   *world
	k8s client.Client
	n   *node.Node
	op  *operator.Operator
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	w, err = startWorld(ctx, GinkgoWriter, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(w.stop()).To(Succeed()) })
	k8s, n, op = w.cp.Client, w.node, w.op
}, NodeTimeout(5*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}
