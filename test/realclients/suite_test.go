package realclients

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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
	// operator is the running manager.
	operator *app.Manager
)

// startOperator runs flagplane's manager in the test process, built as the
// manager binary builds it (app.New), with its sync server on a loopback
// port and namespace tokens enabled.
func startOperator() {
	keyFile := filepath.Join(GinkgoT().TempDir(), "namespace-token-keys")
	key := make([]byte, syncserver.MinKeyLen)
	_, _ = rand.Read(key)
	Expect(os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600)).To(Succeed())

	opts := app.DefaultOptions()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// Admission is test/admission's: its server would take a fixed port on
	// every interface, which the suites running beside this one use too.
	opts.Webhooks = false
	opts.Sync.BindAddress = "127.0.0.1:0"
	opts.Sync.NamespaceTokenKeyFile = keyFile
	ctx, cancel := context.WithCancel(context.Background())
	m, err := app.New(ctx, cp.Config, opts)
	if err != nil {
		cancel()
		Expect(err).NotTo(HaveOccurred())
	}
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(m.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 30*time.Second).Should(BeClosed())
	})
	Eventually(m.Controller.Ready, 30*time.Second, 50*time.Millisecond).Should(BeTrue(), "operator never became ready")
	Eventually(m.Sync.Addr).ShouldNot(BeNil(), "the sync server never listened")
	operator, syncSrv, syncAddr, namespaceTokens = m, m.Sync, m.Sync.Addr().String(), m.Sync.NamespaceTokens()
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
	startOperator()
}, NodeTimeout(10*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
}
