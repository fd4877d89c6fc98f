package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// flagd's kubernetes sync runs in the sidecar with nothing but what the
// node gives any pod: in-cluster configuration and the pod's own
// service-account token. So a Role that flagd cannot work with (one
// without list and watch on the namespace's FeatureFlags) fails this spec:
// flagd keeps its first value and never sees the edit.
var _ = Describe("the kubernetes provider", func() {
	It("lets flagd watch the FeatureFlag under the pod's own service account, with the Role flagplane grants; deleting the FeatureFlag revokes the Role, and flagd keeps its last value", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "off")
		web := deployment(ns, "web", appImage, nil)
		web.Spec.Template.Spec.ServiceAccountName = "web"
		create(ctx, ff, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
			source(ns, "flags", "web", v1beta1.Source{Source: "checkout", Provider: v1beta1.SyncProviderKubernetes}), web)

		pod := readyPod(ctx, ns, "web")
		Expect(sidecarOf(pod).Args).To(ContainElement(ContainSubstring(`"provider":"kubernetes"`)))
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("flagd reads as the pod's service account, not as anyone with more rights")
		token, err := n.ReadFile(key(pod), injection.SidecarName, "/var/run/secrets/kubernetes.io/serviceaccount/token")
		Expect(err).NotTo(HaveOccurred())
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(token)}}
		Expect(k8s.Create(ctx, review)).To(Succeed())
		Expect(review.Status.User.Username).To(Equal("system:serviceaccount:" + ns + ":web"))

		By("editing the FeatureFlag: flagd's own watch, authorised by flagplane's Role")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))

		By("deleting the FeatureFlag")
		rbacKey := client.ObjectKey{Namespace: ns, Name: rbac.Name(topology.WorkloadKey(topology.KindDeployment, ns, "web"))}
		Expect(k8s.Get(ctx, rbacKey, &rbacv1.Role{})).To(Succeed())
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, rbacKey, &rbacv1.Role{}) }).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func() error { return k8s.Get(ctx, rbacKey, &rbacv1.RoleBinding{}) }).Should(Satisfy(apierrors.IsNotFound))
		// flagd v0.16's kubernetes sync ignores the deletion of the
		// FeatureFlag it serves (it logs "configuration deleted" at debug
		// level and keeps its flags): that is flagd's behaviour, shown here
		// so that a change in it is noticed.
		Consistently(resolve(addr)).Should(Equal(evaluated("on")))
	})
})
