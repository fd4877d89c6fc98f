package names

import (
	"context"
	"math/rand/v2"
	"path/filepath"
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
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/workflows/injection"
)

func TestNames(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Names at the limits Kubernetes sets, through the real API server and the test node")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
	op  *operator.Operator
	n   *node.Node
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
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

	n, err = node.Start(ctx, cp, node.Options{Log: GinkgoWriter, FlagdImage: injection.DefaultSidecarImage,
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	podAddrs.Set(n)
	// Registered last, so it runs first: the pods' processes stop before
	// the operator and the control plane.
	DeferCleanup(func() { Expect(n.Stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(45 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}

// newLongNamespace creates a namespace of 63 characters, the longest a
// namespace may have, deleted after the spec; a failed spec reports its
// container logs and events.
func newLongNamespace(ctx context.Context) string {
	GinkgoHelper()
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte("names-")
	for len(b) < 63 {
		b = append(b, alnum[rand.IntN(len(alnum))])
	}
	ns := string(b)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
			AddReportEntry("events of namespace "+ns, fixtures.Events(ctx, k8s, ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	}).Should(Succeed())
	return ns
}

// podAddrs reaches the node's pods for the manager, whose ports are ports
// of this host.
var podAddrs node.Addresses
