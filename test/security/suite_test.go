package security

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestSecurity(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Security: the attack table")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
	op  *operator.Operator
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	cp, err = controlplane.Start(ctx, controlplane.Options{
		Log:                   GinkgoWriter,
		GatewayAPI:            true,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
		// Tenants are namespace admins: the aggregation controller gives the
		// built-in admin role flagplane's editor rules, as on a cluster
		// where flagplane is installed.
		Controllers: append(append([]string{}, controlplane.DefaultControllers...), "clusterrole-aggregation"),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client
	_, err = cp.Kubectl("apply", "--server-side", "-k", filepath.Join(root, "config", "rbac", "aggregate"))
	Expect(err).NotTo(HaveOccurred())

	op, err = operator.Start(ctx, cp, operator.Options{SyncServer: true, Dir: GinkgoT().TempDir()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
}, NodeTimeout(10*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	// A denial is shown by what does not happen: long enough for the
	// operator to have acted on every event (it takes milliseconds).
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(250 * time.Millisecond)
}
