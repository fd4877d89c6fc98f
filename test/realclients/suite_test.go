package realclients

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestRealClients(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Real clients")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
	// binDir holds the clients `make realclients` built.
	binDir string
	// syncAddr is the sync server's loopback address.
	syncAddr string
	// syncSrv is the operator's sync server.
	syncSrv *syncserver.Server
	// namespaceTokens issues the credentials of injected sidecars.
	namespaceTokens *syncserver.NamespaceTokens
	// op is the running manager.
	op *operator.Operator
)

// startOperator runs flagplane's manager in the test process, built as the
// manager binary builds it (app.New), with its sync server on a loopback
// port and namespace tokens enabled.
func startOperator(ctx context.Context) {
	var err error
	op, err = operator.Start(ctx, cp, operator.Options{SyncServer: true, Dir: GinkgoT().TempDir(),
		Configure: func(o *app.Options) {
			// Admission is test/admission's: the control plane here has
			// no webhook configurations.
			o.Webhooks = false
		}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
	syncSrv, syncAddr, namespaceTokens = op.Sync, op.SyncAddress, op.NamespaceTokens
	Expect(namespaceTokens).NotTo(BeNil())
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	binDir = filepath.Join(root, "bin")
	for _, b := range []string{"flagd", "flagplane-sdkclient"} {
		_, err := os.Stat(filepath.Join(binDir, b))
		Expect(err).NotTo(HaveOccurred(), "%s missing: run `make realclients`", b)
	}

	cp, err = controlplane.Start(ctx, controlplane.Options{Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client
	startOperator(ctx)
}, NodeTimeout(10*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
}
