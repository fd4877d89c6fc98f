package failover

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/managerproc"
)

func TestFailover(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Failover under faults")
}

var (
	cp      *controlplane.ControlPlane
	k8s     client.Client
	manager string // the manager binary
	workDir string
)

// leaseNamespace holds the replicas' Lease.
const leaseNamespace = "flagplane-system"

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	workDir, err = os.MkdirTemp("", "flagplane-failover-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if os.Getenv(controlplane.KeepDirEnv) == "" {
			_ = os.RemoveAll(workDir)
		}
	})
	By("building cmd/manager")
	built := make(chan error, 1)
	go func() {
		var err error
		manager, err = managerproc.Build(ctx, repoRoot(), workDir)
		built <- err
	}()
	cp, err = controlplane.Start(ctx, controlplane.Options{GatewayAPI: true, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}})).To(Succeed())
	Expect(<-built).To(Succeed())
}, NodeTimeout(10*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}
