package reconcile

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/rbac"
)

var _ = Describe("kubernetes provider RBAC", func() {
	It("grants the workload's service account what flagd's kubernetes sync does (get the named FeatureFlags, list and watch the namespace's), and takes it back", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		d := deployment(ns, "web", nil, nil)
		d.Spec.Template.Spec.ServiceAccountName = "web"
		src := source(ns, "flags", []v1beta1.Source{{Source: "checkout", Provider: v1beta1.SyncProviderKubernetes}}, targeting("Deployment", "web"))
		create(ctx, flagSet(ns, "checkout", "on"), flagSet(ns, "unrelated", "on"), d, src)

		name := rbac.Name(topology.WorkloadKey(topology.KindDeployment, ns, "web"))
		key := client.ObjectKey{Namespace: ns, Name: name}
		Eventually(func() []rbacv1.PolicyRule {
			r := &rbacv1.Role{}
			_ = k8s.Get(ctx, key, r)
			return r.Rules
		}).Should(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"core.openfeature.dev"}, Resources: []string{"featureflags"}, Verbs: []string{"get"}, ResourceNames: []string{"checkout"}},
			{APIGroups: []string{"core.openfeature.dev"}, Resources: []string{"featureflags"}, Verbs: []string{"list", "watch"}},
		}))
		subjects := func() []rbacv1.Subject {
			b := &rbacv1.RoleBinding{}
			_ = k8s.Get(ctx, key, b)
			return b.Subjects
		}
		Eventually(subjects).Should(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "web", Namespace: ns}}))
		Expect(configMapExists(ctx, configMapOf(ns, ns, "checkout"))()).To(BeFalse(), "the kubernetes provider needs no ConfigMap")
		Eventually(sourceCondition(ctx, ns, "flags", "Programmed")).Should(HavePrefix(statusTrue))

		By("what the service account may do, asked of the API server")
		canI := func(verb, resource string, namespace string) string {
			out, _ := cp.Kubectl("auth", "can-i", verb, resource, "-n", namespace,
				"--as", "system:serviceaccount:"+ns+":web")
			return out
		}
		Expect(canI("get", "featureflags.core.openfeature.dev/checkout", ns)).To(HavePrefix("yes"))
		Expect(canI("list", "featureflags.core.openfeature.dev", ns)).To(HavePrefix("yes"), "flagd's informer lists the namespace's FeatureFlags")
		Expect(canI("watch", "featureflags.core.openfeature.dev", ns)).To(HavePrefix("yes"), "and watches them")
		Expect(canI("get", "featureflags.core.openfeature.dev/unrelated", ns)).To(HavePrefix("no"))
		Expect(canI("delete", "featureflags.core.openfeature.dev/checkout", ns)).To(HavePrefix("no"))
		Expect(canI("list", "featureflags.core.openfeature.dev", "default")).To(HavePrefix("no"), "never another namespace")

		By("service account changed: the binding follows")
		update(ctx, d, func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "web-v2" })
		Eventually(subjects).Should(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "web-v2", Namespace: ns}}))

		By("source deleted: the grant goes")
		remove(ctx, src)
		Eventually(func() bool { return k8s.Get(ctx, key, &rbacv1.Role{}) == nil }).Should(BeFalse())
		Eventually(func() bool { return k8s.Get(ctx, key, &rbacv1.RoleBinding{}) == nil }).Should(BeFalse())
	})
})
