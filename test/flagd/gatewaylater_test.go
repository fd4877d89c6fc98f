package flagd

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/workflows/flagds"
)

// Gateway API installed after flagplane: a control plane of its own,
// started without Gateway API's CRDs, then given them as a cluster
// administrator gives them (kubectl apply of the CRD files of Gateway API's
// release). No node: what is asserted is the objects, not the pods.
var _ = Describe("a Flagd asking for an HTTPRoute, when Gateway API is installed later", Ordered, func() {
	var (
		cp2 *controlplane.ControlPlane
		c2  client.Client
	)
	BeforeAll(func(ctx SpecContext) {
		var err error
		cp2, err = controlplane.Start(ctx, controlplane.Options{RootDir: root, Log: GinkgoWriter,
			WebhookInstallOptions: operator.WebhookInstallOptions(root)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(cp2.Stop()).To(Succeed()) })
		c2 = cp2.Client
		op2, err := operator.Start(ctx, cp2, operator.Options{Dir: GinkgoT().TempDir(), Configure: func(o *app.Options) {
			o.GatewayAPIPoll = 200 * time.Millisecond
			o.Registry = prometheus.NewRegistry() // the suite's operator has the default one
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(op2.Stop()).To(Succeed()) })
	}, NodeTimeout(5*time.Minute))

	It("waits for the HTTPRoute CRD, says so, and creates the HTTPRoute once it is installed", func(ctx SpecContext) {
		ns, err := cp2.NewNamespace(ctx, "late")
		Expect(err).NotTo(HaveOccurred())
		fd := newFlagd(ns, "flagd", "src", func(f *v1beta1.Flagd) {
			f.Spec.Ingress.Enabled = true
			f.Spec.GatewayApiRoutes.Enabled = true
			f.Spec.GatewayApiRoutes.Hosts = []string{"flags.example"}
		})
		for _, o := range []client.Object{flagSet(ns, "flags", "on"), source(ns, "src", fixtures.FileRef("flags")), fd} {
			Expect(c2.Create(ctx, o)).To(Succeed())
		}
		get := func() (*v1beta1.Flagd, error) { return fd, c2.Get(ctx, client.ObjectKeyFromObject(fd), fd) }
		Eventually(get).Should(haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionFalse, v1beta1.ReasonGatewayAPINotInstalled))
		Expect(fixtures.KStatus(ctx, c2, cp2.Scheme, fd)).To(HavePrefix("Failed: "), "an API to install needs a user")
		Expect(c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, &networkingv1.Ingress{})).To(Succeed(),
			"what does not need Gateway API is in place meanwhile")

		By("installing Gateway API's CRDs")
		bin := os.Getenv("KUBEBUILDER_ASSETS")
		if bin == "" {
			bin = filepath.Join(root, "bin")
		}
		_, err = cp2.Kubectl("apply", "--server-side", "-f", controlplane.GatewayAPICRDDir(bin))
		Expect(err).NotTo(HaveOccurred())

		route := &unstructured.Unstructured{}
		route.SetGroupVersionKind(flagds.HTTPRouteGVK)
		Eventually(func() error { return c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, route) }, time.Minute).Should(Succeed())
		Expect(metav1.IsControlledBy(route, fd)).To(BeTrue())
		hostnames, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
		Expect(hostnames).To(Equal([]string{"flags.example"}))
		Eventually(get).Should(And(haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionTrue),
			HaveField("Status.Endpoints", ContainElement(HaveField("Kind", "HTTPRoute")))))

		By("a route deleted by hand comes back")
		Expect(c2.Delete(ctx, route)).To(Succeed())
		Eventually(func() (string, error) {
			r := &unstructured.Unstructured{}
			r.SetGroupVersionKind(flagds.HTTPRouteGVK)
			err := c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, r)
			return string(r.GetUID()), err
		}).Should(And(Not(BeEmpty()), Not(Equal(string(route.GetUID())))))
	})
})
