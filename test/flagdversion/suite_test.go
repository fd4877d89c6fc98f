package flagdversion

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
)

func TestFlagdVersion(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "FlagdVersion: what flagplane writes and says for the flagd release it injects")
}

// The releases the operator injects first.
const (
	sidecarTag = "v0.15.4"
	flagdTag   = "v0.18.0"
)

var (
	root string
	cp   *controlplane.ControlPlane
	k8s  client.Client
	op   *operator.Operator
	n    *node.Node
)

// startOperator runs the manager with the given tags, its sync server on
// (flagd-proxy sources need it), and a metrics registry of its own: the
// suite runs a second manager after the first.
func startOperator(ctx context.Context, sidecar, flagd string) *operator.Operator {
	GinkgoHelper()
	o, err := operator.Start(ctx, cp, operator.Options{PodAddress: podAddrs.PodAddress, SyncServer: true, Dir: GinkgoT().TempDir(), Configure: func(o *app.Options) {
		o.Sidecar.Tag, o.Flagd.Tag = sidecar, flagd
		o.Registry = prometheus.NewRegistry()
	}})
	Expect(err).NotTo(HaveOccurred())
	return o
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	cp, err = controlplane.Start(ctx, controlplane.Options{
		RootDir: root, Scheduler: true, Log: GinkgoWriter,
		WebhookInstallOptions: operator.WebhookInstallOptions(root),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	op = startOperator(ctx, sidecarTag, flagdTag)
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })

	n, err = node.Start(ctx, cp, node.Options{Log: GinkgoWriter,
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	podAddrs.Set(n)
	// Registered last, so it runs first: the pods' processes stop before
	// the operator and the control plane.
	DeferCleanup(func() { Expect(n.Stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

// warnings collects the warnings the API server sends a client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

var _ rest.WarningHandlerWithContext = (*warnings)(nil)

// warnedClient is a controller-runtime client whose warnings w collects.
func warnedClient() (client.Client, *warnings) {
	GinkgoHelper()
	w := &warnings{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c, w
}

func init() {
	SetDefaultEventuallyTimeout(45 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// podAddrs reaches the node's pods for the manager, whose ports are ports
// of this host.
var podAddrs node.Addresses
