// Package lateinstall holds the suite of a cluster that gets Gateway API
// after flagplane: the operator starts without the ReferenceGrant CRD and
// honours ReferenceGrants once the CRD is installed, without a restart.
package lateinstall

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/controllers"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

func TestLateInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Gateway API installed after flagplane")
}

var cp *controlplane.ControlPlane

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })

	runCtx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme: cp.Scheme, Cache: controllers.CacheOptions(cache.Options{}, workflows.GeneratedMetadata{}),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	c, err := controllers.New(runCtx, mgr, controllers.Options{GrantCRDPoll: 200 * time.Millisecond})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(runCtx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 30*time.Second).Should(BeClosed())
	})
	Eventually(c.Ready, 30*time.Second).Should(BeTrue())
}, NodeTimeout(5*time.Minute))

var _ = It("resolves a cross-namespace reference once Gateway API is installed and a ReferenceGrant permits it", func(ctx SpecContext) {
	k8s := cp.Client
	flags, team := newNamespace(ctx), newNamespace(ctx)
	for _, o := range []client.Object{
		fixtures.FlagSet(flags, "shared", "on"), fixtures.Deployment(team, "web", nil, nil),
		fixtures.Source(team, "src", []v1beta1.Source{fixtures.FileRef(flags + "/shared")}, fixtures.Targeting("Deployment", "web")),
	} {
		Expect(k8s.Create(ctx, o)).To(Succeed())
	}
	resolvedRefs := func() string {
		s := &v1beta1.FeatureFlagSource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: "src"}, s)).To(Succeed())
		if c := meta.FindStatusCondition(s.Status.Conditions, v1beta1.ConditionResolvedRefs); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return "missing"
	}
	Eventually(resolvedRefs).Should(Equal("False/" + v1beta1.ReasonRefNotPermitted))

	By("Gateway API's CRDs are installed, the operator running all along")
	_, err := cp.Kubectl("apply", "--server-side", "-f", filepath.Join(controlplane.GatewayAPICRDDir(filepath.Dir(cp.KubectlPath)), "gateway.networking.k8s.io_referencegrants.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error {
		return k8s.Create(ctx, fixtures.ReferenceGrant(flags, "team", team, "shared"))
	}, 30*time.Second).Should(Succeed(), "the API server serves ReferenceGrants once the CRD is established")

	cm := client.ObjectKey{Namespace: team, Name: topology.ConfigMapName(topology.FlagSetKey(flags, "shared"))}
	Eventually(func() error { return k8s.Get(ctx, cm, &corev1.ConfigMap{}) }, 30*time.Second).Should(Succeed())
	Eventually(resolvedRefs).Should(Equal("True/" + v1beta1.ReasonResolvedRefs))
})

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, "late")
	Expect(err).NotTo(HaveOccurred())
	return ns
}
