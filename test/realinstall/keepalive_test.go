package realinstall

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The OpenFeature Operator v0.9.3's keepalive fields, as the install's
// flagd (v0.16.0, which reads neither) gets them: the API server stores
// them, flagplane leaves them out of the sidecar and says why on the
// source, and the real kubelet runs the pod, which serves its flags.
// What a v0.16.1 gets is workflows/injection's TestEveryVouchedRelease:
// its module is not served here, so no image of it runs.
var _ = Describe("the OpenFeature Operator v0.9.3's keepalive fields on a real node", func() {
	It("are stored, left out of a flagd release that does not read them with FlagdVersionSupported=False naming them, and the pod runs and serves", func(ctx SpecContext) {
		ns := newNamespace(ctx, "keepalive")
		ff := fixtures.FlagSet(ns, "checkout", "off")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("checkout")})
		src.Spec.KeepAliveMinTime = &metav1.Duration{Duration: 45 * time.Second}
		src.Spec.KeepAlivePermitWithoutStream = ptr.To(false)
		create(ctx, ff, src, app(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}))

		stored := &v1beta1.FeatureFlagSource{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), stored)).To(Succeed())
		Expect(stored.Spec.KeepAliveMinTime).To(Equal(&metav1.Duration{Duration: 45 * time.Second}))
		Expect(stored.Spec.KeepAlivePermitWithoutStream).To(Equal(ptr.To(false)))

		pod := injectedPod(ctx, ns, "web")
		var sidecar *corev1.Container
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == injection.SidecarName {
				sidecar = &pod.Spec.InitContainers[i]
			}
		}
		Expect(sidecar).NotTo(BeNil())
		for _, flag := range []string{"keep-alive-min-time", "keep-alive-permit-without-stream"} {
			Expect(sidecar.Env).NotTo(ContainElement(HaveField("Name", flagdversion.EnvVar(flag))), "v0.16.0 does not read it")
		}
		serves(flagdAddr(pod), "off")

		Eventually(func(g Gomega) {
			got := &v1beta1.FeatureFlagSource{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionFlagdVersionSupported)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(And(ContainSubstring("keepAliveMinTime"), ContainSubstring("keepAlivePermitWithoutStream"),
				ContainSubstring("--keep-alive-min-time")))
		}).WithTimeout(deliveryTimeout).Should(Succeed())
	})
})
