package node_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
)

func TestNode(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Test node")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
	n   *node.Node
)

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{Scheduler: true, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	n, err = node.Start(ctx, cp, node.Options{
		Log:      GinkgoWriter,
		Binaries: map[string]string{sdkClientImage: filepath.Join(filepath.Dir(cp.KubectlPath), "flagplane-sdkclient")},
		// Short back-offs: the liveness spec waits for a restart.
		RestartBackoff: 500 * time.Millisecond, MaxRestartBackoff: 5 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
	// Registered after cp.Stop, so run before it.
	DeferCleanup(func() { Expect(n.Stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}
