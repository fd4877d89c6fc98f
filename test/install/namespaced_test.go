package install

import (
	"net/http"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/topology"
)

// config/namespaced: the standalone model, one manager per team with
// namespaced Roles only. The team's namespace exists before; the CRDs were
// installed by a cluster administrator (envtest did it here).
func describeNamespaced() {
	manager := serviceAccount(teamNS, managerSA)

	BeforeAll(func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNS}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		kubectl("apply", "--server-side", "-k", filepath.Join(rootDir, "config", "namespaced"))
	})

	It("installs namespaced objects only, in the team's namespace", func() {
		out := kubectl("kustomize", filepath.Join(rootDir, "config", "namespaced"))
		for _, doc := range strings.Split(out, "\n---\n") {
			Expect(doc).To(ContainSubstring("namespace: "+teamNS), "every object is in the team's namespace:\n%s", doc)
			Expect(doc).NotTo(MatchRegexp(`(?m)^kind: (Cluster\w+|Namespace|CustomResourceDefinition)$`), "no cluster-scoped object:\n%s", doc)
		}
		for _, obj := range []string{
			"role.rbac.authorization.k8s.io/flagplane-manager",
			"rolebinding.rbac.authorization.k8s.io/flagplane-manager",
			"role.rbac.authorization.k8s.io/flagplane-manager-own-namespace",
			"deployment.apps/flagplane-manager",
		} {
			Expect(kubectl("get", obj, "-n", teamNS, "-o", "name")).To(Equal(obj+"\n"), obj)
		}
	})

	It("runs the manager scoped to its own namespace", func(ctx SpecContext) {
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "flagplane-manager"}, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--namespaces=$(POD_NAMESPACE)",
			"--mutating-webhook-configuration=flagplane-injector-$(POD_NAMESPACE)",
			"--validating-webhook-configuration=flagplane-validator-$(POD_NAMESPACE)"))
		Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--webhooks=false"), "it serves its team's admission")
		Expect(d.Spec.Template.Spec.Containers[0].Env).To(ContainElement(And(
			HaveField("Name", "POD_NAMESPACE"), HaveField("ValueFrom.FieldRef.FieldPath", "metadata.namespace"))))
	})

	DescribeTable("its ServiceAccount",
		func(want bool, args ...string) {
			Expect(canI(manager, args...)).To(Equal(want), "kubectl auth can-i %s", strings.Join(args, " "))
		},
		Entry("may list FeatureFlags in its namespace", true, "list", "featureflags.core.openfeature.dev", "-n", teamNS),
		Entry("may patch FeatureFlagSource status in its namespace", true, "patch", "featureflagsources.core.openfeature.dev", "--subresource=status", "-n", teamNS),
		Entry("may create ConfigMaps in its namespace", true, "create", "configmaps", "-n", teamNS),
		Entry("may watch Deployments in its namespace", true, "watch", "deployments.apps", "-n", teamNS),
		Entry("may update its Lease", true, "update", "leases.coordination.k8s.io", "-n", teamNS),
		Entry("may not list FeatureFlags cluster-wide", false, "list", "featureflags.core.openfeature.dev", "-A"),
		Entry("may not list FeatureFlags of another namespace", false, "list", "featureflags.core.openfeature.dev", "-n", "default"),
		Entry("may not create ConfigMaps in another namespace", false, "create", "configmaps", "-n", "default"),
		Entry("may not watch Deployments cluster-wide", false, "watch", "deployments.apps", "-A"),
		Entry("may not create Roles in another namespace", false, "create", "roles.rbac.authorization.k8s.io", "-n", "default"),
		Entry("may not get Secrets in another namespace", false, "get", "secrets", "-n", "default"),
		Entry("may not create Pods", false, "create", "pods", "-n", teamNS),
		Entry("may not list Namespaces", false, "list", "namespaces"),
	)

	It("reconciles its namespace, with only those Roles, and leaves other namespaces alone", func(ctx SpecContext) {
		other := newNamespace(ctx, "other-team")
		opts := app.DefaultOptions()
		opts.Namespaces = []string{teamNS}
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = teamNS
		opts.LeaderElectionID = "flagplane-" + teamNS
		opts.Registry = newRegistry()
		opts.Webhooks = false // as the overlay runs it
		m := startManager(impersonating(teamNS, managerSA), "127.0.0.1", opts)
		Eventually(httpStatus("http://" + m.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
		Eventually(m.Elected()).Should(BeClosed())

		kubectl("apply", "-k", filepath.Join(rootDir, "config", "samples"), "-n", teamNS)
		kubectl("apply", "-k", filepath.Join(rootDir, "config", "samples"), "-n", other)
		mine := client.ObjectKey{Namespace: teamNS, Name: topology.ConfigMapName(topology.FlagSetKey(teamNS, "shop-flags"))}
		theirs := client.ObjectKey{Namespace: other, Name: topology.ConfigMapName(topology.FlagSetKey(other, "shop-flags"))}
		Eventually(func() error { return k8s.Get(ctx, mine, &corev1.ConfigMap{}) }).Should(Succeed())
		Eventually(func(g Gomega) {
			s := &v1beta1.FeatureFlagSource{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "shop"}, s)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "%+v", s.Status.Conditions)
		}).Should(Succeed())
		Consistently(func() bool {
			err := k8s.Get(ctx, theirs, &corev1.ConfigMap{})
			Expect(client.IgnoreNotFound(err)).To(Succeed())
			return err == nil
		}).Should(BeFalse(), "another team's namespace is not this manager's")
		s := &v1beta1.FeatureFlagSource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: other, Name: "shop"}, s)).To(Succeed())
		Expect(s.Status.Conditions).To(BeEmpty(), "nor is its status")
		Expect(m.Controller.Topology().Snapshot().Sources()).To(ConsistOf(topology.SourceKey(teamNS, "shop")))

		By("serving metrics only once a cluster administrator lets it ask the API server about its callers")
		// A scraper that config/default's ClusterRole lets read metrics.
		token := newServiceAccount(ctx, other, "prometheus")
		kubectl("create", "clusterrolebinding", "flagplane-metrics-reader-"+other,
			"--clusterrole=flagplane-metrics-reader", "--serviceaccount="+other+":prometheus")
		DeferCleanup(func() { kubectl("delete", "clusterrolebinding", "flagplane-metrics-reader-"+other) })
		url := "https://" + m.metricsAddr + "/metrics"
		// Its Roles cannot grant TokenReviews: the filter cannot authenticate anyone.
		Expect(answerTo(url, token)).To(And(HaveField("Status", http.StatusInternalServerError),
			HaveField("Body", ContainSubstring("Authentication failed"))))
		kubectl("create", "clusterrolebinding", "flagplane-manager-auth-delegator-"+teamNS,
			"--clusterrole=system:auth-delegator", "--serviceaccount="+teamNS+":"+managerSA)
		DeferCleanup(func() { kubectl("delete", "clusterrolebinding", "flagplane-manager-auth-delegator-"+teamNS) })
		// The filter does not cache a TokenReview that failed.
		Eventually(func() int { return answerTo(url, token).Status }).Should(Equal(http.StatusOK))
		Expect(answerTo(url, "")).To(HaveField("Status", http.StatusUnauthorized))
	})
}
