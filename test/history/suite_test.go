package history

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/internal/flagplanecli"
	"github.com/flagplane/flagplane/test/operator"
)

func TestHistory(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "History: every accepted FeatureFlag spec recorded, pruned, listed and rolled back")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
	op  *operator.Operator
	// flagplaneBin is the flagplane command, built from cmd/flagplane.
	flagplaneBin string
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	flagplaneBin, err = flagplanecli.Build(root, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())

	// The resourcequota controller computes a quota's usage, without which
	// the API server's quota admission refuses every create it governs.
	cp, err = controlplane.Start(ctx, controlplane.Options{RootDir: root, Log: GinkgoWriter,
		Controllers: append(slices.Clone(controlplane.DefaultControllers), "resourcequota"),
		// The webhooks of config/webhook, the spec author's among them.
		WebhookInstallOptions: operator.WebhookInstallOptions(root)})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	op, err = operator.Start(ctx, cp, operator.Options{Dir: GinkgoT().TempDir(), Configure: func(o *app.Options) {
		// Admission on, for the spec author's webhook; FeatureFlags
		// admitted unjudged, so that a spec flagd refuses reaches the
		// manager, as with the webhooks failing open.
		o.Admission.FlagsValidation = false
		o.Admission.Heal = false
		o.Registry = prometheus.NewRegistry()
		// Low enough for a spec to fill a namespace; the others make at
		// most 4 revisions in theirs.
		o.RevisionNamespaceLimit = namespaceLimit
	}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

// namespaceLimit is the manager's --revision-namespace-limit.
const namespaceLimit = 8

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// newNamespace gives a spec a namespace of its own, deleted after it; a
// failed spec reports the namespace's events.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("events of namespace "+ns, fixtures.Events(ctx, k8s, ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}
