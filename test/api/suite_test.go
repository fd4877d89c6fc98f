package api

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/controlplane"
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "API suite")
}

var (
	cp  *controlplane.ControlPlane
	k8s client.Client
)

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cp.Stop)
	AddReportEntry("control plane start", cp.Timings)
	k8s = cp.Client

	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}, NodeTimeout(5*time.Minute))

// newNamespace gives a spec a namespace of its own, deleted after the spec
// (without waiting: the namespace controller finishes that in the background).
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	name, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		ns := &corev1.Namespace{}
		ns.Name = name
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed())
	})
	return name
}

// kubectl runs kubectl and fails the spec if it fails.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := cp.Kubectl(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func key(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}
