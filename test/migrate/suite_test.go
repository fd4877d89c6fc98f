package migrate

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/migrate"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestMigrate(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Migrate: from the OpenFeature Operator to flagplane")
}

var (
	root string
	cp   *controlplane.ControlPlane
	k8s  client.Client
	op   *operator.Operator
	// flagplaneBin is the flagplane command, built from cmd/flagplane.
	flagplaneBin string
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())

	flagplaneBin = filepath.Join(GinkgoT().TempDir(), "flagplane")
	build := exec.Command("go", "build", "-o", flagplaneBin, "./cmd/flagplane")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building flagplane: %s", out)

	cp, err = controlplane.Start(ctx, controlplane.Options{
		Log:                   GinkgoWriter,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	// A client that knows CRDs too.
	scheme, err := migrate.Scheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cp.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// flagplane, installed beside the leftovers: its CRDs (the control
	// plane installs config/crd), webhooks and manager with the sync server.
	op, err = operator.Start(ctx, cp, operator.Options{SyncServer: true, Dir: GinkgoT().TempDir(),
		Configure: func(o *app.Options) { o.Registry = prometheus.NewRegistry() }})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
}, NodeTimeout(10*time.Minute))

// migrateCmd runs `flagplane migrate` against the control plane, as a
// cluster administrator, and returns its output and exit error.
func migrateCmd(args ...string) (string, error) {
	cmd := exec.Command(flagplaneBin, append([]string{"migrate", "--kubeconfig", cp.KubeconfigPath}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("$ flagplane migrate %v\n%s\n", args, out)
	return string(out), err
}

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}
