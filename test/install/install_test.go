package install

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The suite is one ordered sequence, as a platform team would go: install
// config/default and look at it (this file), run the manager with that RBAC
// (manager_test.go), then install config/namespaced for a team
// (manager_test.go), try what its admission policy refuses (policy_test.go),
// then install config/namespaced for a team (namespaced_test.go).
// ContinueOnFailure: a failed row of the RBAC matrix does not hide the others.
var _ = Describe("flagplane's install", Ordered, ContinueOnFailure, func() {
	Describe("every combination of config/components", describeCombinations)
	Describe("the manager's default image", describeDefaultImage)
	Describe("config/default", Ordered, describeDefault)
	Describe("the manager with the RBAC and the admission policy of config/default", Ordered, describeManager)
	Describe("the manager's misuse, refused by config/default's admission policy", Ordered, describePolicy)
	Describe("config/default with every component", Ordered, describeFullest)
	Describe("the namespace-scoped mode, for two teams (config/namespaced; Helm)", Ordered, describeNamespaced)
	Describe("helm install of charts/flagplane, instead of config/default", Ordered, describeHelm)
})

// describeDefault applies config/default, as a platform team would, and
// looks at the result. --force-conflicts: envtest created the CRDs already,
// with another field manager.
func describeDefault() {
	manager := serviceAccount(systemNS, managerSA)

	BeforeAll(func(ctx SpecContext) {
		kubectl("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(rootDir, "config", "default"))
		// What follows runs with the policy in force.
		waitForPolicy(ctx)
	})

	It("creates the namespace, CRDs, ServiceAccount, RBAC, admission policy, manager Deployment, Services, webhook configurations and disruption budget", func() {
		for _, obj := range []string{
			"namespace/flagplane-system",
			"customresourcedefinition.apiextensions.k8s.io/featureflags.core.openfeature.dev",
			"customresourcedefinition.apiextensions.k8s.io/featureflagsources.core.openfeature.dev",
			"customresourcedefinition.apiextensions.k8s.io/inprocessconfigurations.core.openfeature.dev",
			"customresourcedefinition.apiextensions.k8s.io/flagds.core.openfeature.dev",
			"customresourcedefinition.apiextensions.k8s.io/featureflagsourcepolicies.policy.flagplane.dev",
			"customresourcedefinition.apiextensions.k8s.io/featureflagrevisions.delivery.flagplane.dev",
			"customresourcedefinition.apiextensions.k8s.io/featureflagrolloutpolicies.delivery.flagplane.dev",
			"clusterrole.rbac.authorization.k8s.io/flagplane-manager",
			"clusterrolebinding.rbac.authorization.k8s.io/flagplane-manager",
			"clusterrole.rbac.authorization.k8s.io/flagplane-editor",
			"clusterrole.rbac.authorization.k8s.io/flagplane-viewer",
			"clusterrole.rbac.authorization.k8s.io/flagplane-policy-admin",
			"clusterrole.rbac.authorization.k8s.io/flagplane-metrics-reader",
			"validatingadmissionpolicy.admissionregistration.k8s.io/flagplane-manager",
			"validatingadmissionpolicybinding.admissionregistration.k8s.io/flagplane-manager",
			"mutatingwebhookconfiguration.admissionregistration.k8s.io/flagplane-injector",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/flagplane-validator",
		} {
			Expect(kubectl("get", obj, "-o", "name")).To(Equal(obj+"\n"), obj)
		}
		for _, obj := range []string{
			"serviceaccount/flagplane-manager",
			"role.rbac.authorization.k8s.io/flagplane-manager-own-namespace",
			"rolebinding.rbac.authorization.k8s.io/flagplane-manager-own-namespace",
			"deployment.apps/flagplane-manager",
			"service/flagplane-metrics",
			"service/flagplane-webhook",
			"service/flagplane-sync",
			"poddisruptionbudget.policy/flagplane-manager",
		} {
			Expect(kubectl("get", obj, "-n", systemNS, "-o", "name")).To(Equal(obj+"\n"), obj)
		}
	})

	It("runs the manager with leader election, probes on /healthz and /readyz, and its ServiceAccount", func(ctx SpecContext) {
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-manager"}, d)).To(Succeed())
		pod := d.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal(managerSA))
		c := pod.Containers[0]
		Expect(c.Args).To(ContainElements("--leader-elect", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081"))
		Expect(c.Ports).To(ContainElement(And(HaveField("Name", "https"), HaveField("ContainerPort", int32(8443)))))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--namespaces")), "cluster-wide")
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(*d.Spec.Replicas).To(BeNumerically(">=", 2), "a standby replica keeps admission available")
	})

	It("serves metrics on the https port of flagplane-metrics, readable with the ClusterRole flagplane-metrics-reader", func(ctx SpecContext) {
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-metrics"}, svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Name", "https"), HaveField("Port", int32(8443)),
			HaveField("TargetPort.StrVal", "https"))))
		reader := &rbacv1.ClusterRole{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-metrics-reader"}, reader)).To(Succeed())
		Expect(reader.Rules).To(ConsistOf(And(
			HaveField("NonResourceURLs", ConsistOf("/metrics", "/debug/topology", "/debug/explain")),
			HaveField("Verbs", ConsistOf("get")),
		)))
	})

	It("has Pods that the restricted Pod Security level admits", func(ctx SpecContext) {
		// flagplane-system enforces the restricted level; the ReplicaSet
		// controller's Pod creations would be refused otherwise.
		Expect(kubectl("get", "namespace", systemNS, "-o", "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}")).To(Equal("restricted"))
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(systemNS),
				client.MatchingLabels{"app.kubernetes.io/name": "flagplane", "app.kubernetes.io/component": "manager"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Spec.ServiceAccountName).To(Equal(managerSA))
			}
		}).Should(Succeed())
	})

	// The matrix of what the manager may and may not do. "yes" rows are what
	// its workflows need; "no" rows are what least privilege forbids.
	DescribeTable("the manager's ServiceAccount",
		func(want bool, args ...string) {
			Expect(canI(manager, args...)).To(Equal(want), "kubectl auth can-i %s", strings.Join(args, " "))
		},
		managerMatrix(),
	)

	It("turns the built-in sync server on, so that flagd-proxy sources work: its Service, its flags, a key Secret the manager keeps", func(ctx SpecContext) {
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-sync"}, svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Port", int32(8015)), HaveField("TargetPort.StrVal", "sync"))))
		dep := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-manager"}, dep)).To(Succeed())
		c := dep.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElements("--sync-bind-address=:8015",
			"--sync-namespace-token-key-secret=flagplane-sync-keys",
			"--sync-server-address=flagplane-sync.$(POD_NAMESPACE).svc:8015"))
		Expect(c.Ports).To(ContainElement(HaveField("Name", "sync")))
		Expect(dep.Spec.Template.Spec.Volumes).To(BeEmpty(), "no Secret to create beforehand: the manager makes it")
	})

	It("lets namespace editors manage flags and viewers read them, through the aggregated roles", func(ctx SpecContext) {
		ns := newNamespace(ctx, "team")
		kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", ns)
		kubectl("create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob", "-n", ns)
		for _, r := range []string{"featureflags.core.openfeature.dev", "featureflagsources.core.openfeature.dev", "inprocessconfigurations.core.openfeature.dev", "flagds.core.openfeature.dev"} {
			Eventually(func() bool { return canI("alice", "create", r, "-n", ns) }).Should(BeTrue(), "alice may create %s", r)
			Expect(canI("alice", "delete", r, "-n", ns)).To(BeTrue())
			Eventually(func() bool { return canI("bob", "list", r, "-n", ns) }).Should(BeTrue(), "bob may list %s", r)
			Expect(canI("bob", "create", r, "-n", ns)).To(BeFalse())
			Expect(canI("alice", "create", r, "-n", "default")).To(BeFalse(), "only in her namespace")
		}
		Expect(canI("alice", "update", "featureflags.core.openfeature.dev", "--subresource=status", "-n", ns)).To(BeFalse(),
			"status is flagplane's to write")
	})

	It("lets only those bound to flagplane-policy-admin write FeatureFlagSourcePolicies: a namespace's editors and admins may read them, not change the overrides", func(ctx SpecContext) {
		ns := newNamespace(ctx, "team")
		kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", ns)
		kubectl("create", "rolebinding", "dana-admin", "--clusterrole=admin", "--user=dana", "-n", ns)
		kubectl("create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob", "-n", ns)
		kubectl("create", "rolebinding", "carol-policy", "--clusterrole=flagplane-policy-admin", "--user=carol", "-n", ns)
		const r = "featureflagsourcepolicies.policy.flagplane.dev"
		Eventually(func() bool { return canI("bob", "list", r, "-n", ns) }).Should(BeTrue(), "view reads policies")
		Eventually(func() bool { return canI("carol", "create", r, "-n", ns) }).Should(BeTrue())
		for _, user := range []string{"alice", "dana", "bob"} {
			Expect(canI(user, "update", r, "-n", ns)).To(BeFalse(), "%s may not change a policy", user)
			Expect(canI(user, "delete", r, "-n", ns)).To(BeFalse(), "%s may not delete a policy", user)
		}
		policy := fmt.Sprintf(`{"apiVersion":"policy.flagplane.dev/v1alpha1","kind":"FeatureFlagSourcePolicy","metadata":{"name":"platform","namespace":%q},`+
			`"spec":{"targetRef":{"group":"","kind":"Namespace","name":%q},"overrides":{"debugLogging":false}}}`, ns, ns)
		path := filepath.Join(GinkgoT().TempDir(), "policy.json")
		Expect(os.WriteFile(path, []byte(policy), 0o600)).To(Succeed())
		By("the API server refusing the namespace's admin, and taking it from the policy admin")
		out, err := cp.Kubectl("create", "-f", path, "--as=dana")
		Expect(err).To(HaveOccurred())
		Expect(fmt.Sprint(out, err)).To(ContainSubstring("forbidden"))
		kubectl("create", "-f", path, "--as=carol")
		out, err = cp.Kubectl("patch", r, "platform", "-n", ns, "--as=alice", "--type=merge", "-p", `{"spec":{"overrides":{"debugLogging":true}}}`)
		Expect(err).To(HaveOccurred())
		Expect(fmt.Sprint(out, err)).To(ContainSubstring("forbidden"))
		Expect(kubectl("get", r, "platform", "-n", ns, "--as=bob", "-o", "jsonpath={.spec.overrides.debugLogging}")).To(Equal("false"))
	})

	It("binds edit, admin and view as the API server bootstraps them, with flagplane's roles aggregated into them", func() {
		for role, label := range map[string]string{"edit": "aggregate-to-edit", "admin": "aggregate-to-admin", "view": "aggregate-to-view"} {
			Expect(kubectl("get", "clusterrole", role, "-o", "jsonpath={.metadata.labels.kubernetes\\.io/bootstrapping}")).To(Equal("rbac-defaults"),
				"the API server's RBAC bootstrap made %s", role)
			Expect(kubectl("get", "clusterrole", role, "-o", "jsonpath={.aggregationRule.clusterRoleSelectors[*].matchLabels}")).
				To(ContainSubstring(`"rbac.authorization.k8s.io/`+label+`":"true"`), "%s aggregates the ClusterRoles labelled %s", role, label)
		}
		Expect(kubectl("get", "clusterrole", "flagplane-editor", "-o", "jsonpath={.metadata.labels}")).To(And(
			ContainSubstring(`"rbac.authorization.k8s.io/aggregate-to-edit":"true"`), ContainSubstring(`"rbac.authorization.k8s.io/aggregate-to-admin":"true"`)))
		Expect(kubectl("get", "clusterrole", "flagplane-viewer", "-o", "jsonpath={.metadata.labels}")).To(
			ContainSubstring(`"rbac.authorization.k8s.io/aggregate-to-view":"true"`))
	})

	It("lets no role it installs write FeatureFlagRevisions: neither edit, admin nor view, nor any of its ClusterRoles bound in a namespace", func(ctx SpecContext) {
		ns := newNamespace(ctx, "team")
		roles := append([]string{"edit", "admin", "view"}, tenantClusterRoles()...)
		Expect(roles).To(ContainElements("flagplane-editor", "flagplane-viewer", "flagplane-policy-admin"))
		for _, role := range roles {
			kubectl("create", "rolebinding", "tenant-"+role, "--clusterrole="+role, "--user=tenant-"+role, "-n", ns)
		}
		By("reading revisions through edit, admin and view (the bindings are in force and aggregated)")
		for _, role := range []string{"edit", "admin", "view", "flagplane-editor", "flagplane-viewer"} {
			Eventually(func() bool { return canI("tenant-"+role, "list", revisions, "-n", ns) }).Should(BeTrue(), "%s reads the history", role)
		}
		Eventually(func() bool { return canI("tenant-edit", "create", rolloutPolicies, "-n", ns) }).Should(BeTrue(), "edit aggregates flagplane-editor")
		By("writing none")
		for _, role := range roles {
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				Expect(canI("tenant-"+role, verb, revisions, "-n", ns)).To(BeFalse(), "%s may %s FeatureFlagRevisions", role, verb)
			}
		}
	})

	It("lets a namespace's editors and admins write FeatureFlagRolloutPolicies and their annotations (promote, abort), not their status; viewers read them", func(ctx SpecContext) {
		ns := newNamespace(ctx, "team")
		kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", ns)
		kubectl("create", "rolebinding", "dana-admin", "--clusterrole=admin", "--user=dana", "-n", ns)
		kubectl("create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob", "-n", ns)
		Eventually(func() bool { return canI("alice", "create", rolloutPolicies, "-n", ns) }).Should(BeTrue())
		Eventually(func() bool { return canI("dana", "create", rolloutPolicies, "-n", ns) }).Should(BeTrue())
		Eventually(func() bool { return canI("bob", "list", rolloutPolicies, "-n", ns) }).Should(BeTrue())
		for _, user := range []string{"alice", "dana"} {
			// promote and abort are annotations: a patch of the object
			for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
				Expect(canI(user, verb, rolloutPolicies, "-n", ns)).To(BeTrue(), "%s may %s FeatureFlagRolloutPolicies", user, verb)
			}
			Expect(canI(user, "get", rolloutPolicies, "--subresource=status", "-n", ns)).To(BeTrue())
			for _, verb := range []string{"update", "patch"} {
				Expect(canI(user, verb, rolloutPolicies, "--subresource=status", "-n", ns)).To(BeFalse(), "status is flagplane's to write")
			}
			Expect(canI(user, "create", rolloutPolicies, "-n", "default")).To(BeFalse(), "only in the namespace of the binding")
		}
		for _, verb := range []string{"get", "list", "watch"} {
			Expect(canI("bob", verb, rolloutPolicies, "-n", ns)).To(BeTrue())
		}
		Expect(canI("bob", "get", rolloutPolicies, "--subresource=status", "-n", ns)).To(BeTrue())
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			Expect(canI("bob", verb, rolloutPolicies, "-n", ns)).To(BeFalse(), "view may not %s", verb)
		}
		Expect(canI("bob", "patch", rolloutPolicies, "--subresource=status", "-n", ns)).To(BeFalse())
	})
}

// The kinds of staged delivery and history, as kubectl names them.
const (
	revisions       = "featureflagrevisions.delivery.flagplane.dev"
	rolloutPolicies = "featureflagrolloutpolicies.delivery.flagplane.dev"
)

// tenantClusterRoles are the ClusterRoles config/default installs that no
// binding of it gives the manager's ServiceAccount: those a platform team
// binds people to, directly or through edit, admin and view.
func tenantClusterRoles() []string {
	GinkgoHelper()
	objs := objects(kustomizeBuild(filepath.Join(rootDir, "config", "default")))
	managers := map[string]bool{}
	for _, o := range objs {
		if o["kind"] != "ClusterRoleBinding" && o["kind"] != "RoleBinding" {
			continue
		}
		subjects, _ := o["subjects"].([]any)
		for _, s := range subjects {
			if sub, _ := s.(map[string]any); sub["kind"] == "ServiceAccount" && sub["name"] == managerSA {
				managers[o["roleRef"].(map[string]any)["name"].(string)] = true
			}
		}
	}
	var roles []string
	for _, o := range objs {
		if name := o["metadata"].(map[string]any)["name"].(string); o["kind"] == "ClusterRole" && !managers[name] {
			roles = append(roles, name)
		}
	}
	slices.Sort(roles)
	return roles
}

// managerMatrix is what the cluster-wide manager's ServiceAccount may and
// may not do (`kubectl auth can-i`): config/default's and the chart's
// install are held to the same rows.
func managerMatrix() []TableEntry {
	rows := []TableEntry{
		Entry("may list FeatureFlags in every namespace", true, "list", "featureflags.core.openfeature.dev", "-A"),
		Entry("may watch FeatureFlagSources in every namespace", true, "watch", "featureflagsources.core.openfeature.dev", "-A"),
		Entry("may watch InProcessConfigurations in every namespace", true, "watch", "inprocessconfigurations.core.openfeature.dev", "-A"),
		Entry("may patch FeatureFlag status", true, "patch", "featureflags.core.openfeature.dev", "--subresource=status", "-n", "default"),
		Entry("may update FeatureFlagSource status", true, "update", "featureflagsources.core.openfeature.dev", "--subresource=status", "-n", "default"),
		Entry("may not update a FeatureFlag's spec", false, "update", "featureflags.core.openfeature.dev", "-n", "default"),
		Entry("may not create FeatureFlags", false, "create", "featureflags.core.openfeature.dev", "-n", "default"),
		Entry("may not delete FeatureFlagSources", false, "delete", "featureflagsources.core.openfeature.dev", "-n", "default"),
		// workloads: read, and patch for rolloutOnChange restarts
		Entry("may list Deployments in every namespace", true, "list", "deployments.apps", "-A"),
		Entry("may watch DaemonSets in every namespace", true, "watch", "daemonsets.apps", "-A"),
		Entry("may patch Deployments (rollout restart)", true, "patch", "deployments.apps", "-n", "default"),
		Entry("may patch StatefulSets (rollout restart)", true, "patch", "statefulsets.apps", "-n", "default"),
		Entry("may create Deployments (a Flagd's; config/policy admits no other)", true, "create", "deployments.apps", "-n", "default"),
		Entry("may not update Deployments (it applies, and patches for restarts)", false, "update", "deployments.apps", "-n", "default"),
		Entry("may not delete Deployments", false, "delete", "deployments.apps", "-n", "default"),
		Entry("may not scale Deployments", false, "update", "deployments.apps", "--subresource=scale", "-n", "default"),
		Entry("may list ReplicaSets (Pod to Deployment)", true, "list", "replicasets.apps", "-A"),
		Entry("may not patch ReplicaSets", false, "patch", "replicasets.apps", "-n", "default"),
		// Flagds: read everywhere, status only; their Services, Ingresses and
		// HTTPRoutes (config/policy admits no others)
		Entry("may watch Flagds in every namespace", true, "watch", "flagds.core.openfeature.dev", "-A"),
		Entry("may update Flagd status", true, "update", "flagds.core.openfeature.dev", "--subresource=status", "-n", "default"),
		Entry("may not update a Flagd's spec", false, "update", "flagds.core.openfeature.dev", "-n", "default"),
		Entry("may not create Flagds", false, "create", "flagds.core.openfeature.dev", "-n", "default"),
		// FeatureFlagSourcePolicies: read everywhere, status only
		Entry("may watch FeatureFlagSourcePolicies in every namespace", true, "watch", "featureflagsourcepolicies.policy.flagplane.dev", "-A"),
		Entry("may update FeatureFlagSourcePolicy status", true, "update", "featureflagsourcepolicies.policy.flagplane.dev", "--subresource=status", "-n", "default"),
		Entry("may not update a FeatureFlagSourcePolicy's spec", false, "update", "featureflagsourcepolicies.policy.flagplane.dev", "-n", "default"),
		// FeatureFlagRevisions and FeatureFlagRolloutPolicies: verbRows, below
		Entry("may watch Services in every namespace", true, "watch", "services", "-A"),
		Entry("may create Services", true, "create", "services", "-n", "default"),
		Entry("may patch Services", true, "patch", "services", "-n", "default"),
		Entry("may delete Services", true, "delete", "services", "-n", "default"),
		Entry("may not update Services (it applies)", false, "update", "services", "-n", "default"),
		Entry("may not proxy to Services", false, "create", "services", "--subresource=proxy", "-n", "default"),
		Entry("may create Ingresses", true, "create", "ingresses.networking.k8s.io", "-n", "default"),
		Entry("may delete HTTPRoutes", true, "delete", "httproutes.gateway.networking.k8s.io", "-n", "default"),
		Entry("may not create Gateways", false, "create", "gateways.gateway.networking.k8s.io", "-n", "default"),
		// generated ConfigMaps
		Entry("may create ConfigMaps", true, "create", "configmaps", "-n", "default"),
		Entry("may delete ConfigMaps", true, "delete", "configmaps", "-n", "default"),
		// Secrets: none outside its own namespace
		Entry("may not get Secrets in default", false, "get", "secrets", "-n", "default"),
		Entry("may not list Secrets in kube-system", false, "list", "secrets", "-n", "kube-system"),
		Entry("may not list Secrets cluster-wide", false, "list", "secrets", "-A"),
		Entry("may not watch Secrets cluster-wide", false, "watch", "secrets", "-A"),
		// ... and in its own, only its webhook certificate
		Entry("may get its webhook certificate Secret", true, "get", "secrets/flagplane-webhook-cert", "-n", systemNS),
		Entry("may update its webhook certificate Secret", true, "update", "secrets/flagplane-webhook-cert", "-n", systemNS),
		Entry("may create Secrets in its namespace (the first certificate, the sync key)", true, "create", "secrets", "-n", systemNS),
		Entry("may get its sync key Secret", true, "get", "secrets/flagplane-sync-keys", "-n", systemNS),
		Entry("may not update its sync key Secret", false, "update", "secrets/flagplane-sync-keys", "-n", systemNS),
		Entry("may not delete its sync key Secret", false, "delete", "secrets/flagplane-sync-keys", "-n", systemNS),
		Entry("may not get other Secrets of its namespace", false, "get", "secrets/something-else", "-n", systemNS),
		Entry("may not list the Secrets of its namespace", false, "list", "secrets", "-n", systemNS),
		Entry("may not create Secrets elsewhere", false, "create", "secrets", "-n", "default"),
		// webhook configurations: the caBundle of its own two
		Entry("may patch its MutatingWebhookConfiguration", true, "patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/flagplane-injector"),
		Entry("may patch its ValidatingWebhookConfiguration", true, "patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/flagplane-validator"),
		Entry("may not patch other MutatingWebhookConfigurations", false, "patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/someone-else"),
		Entry("may not create webhook configurations", false, "create", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
		Entry("may not delete its webhook configurations", false, "delete", "mutatingwebhookconfigurations.admissionregistration.k8s.io/flagplane-injector"),
		// Pods: admission receives the Pod in the request; the healer watches
		// Pods to notice one admitted without its sidecar, and rolls its
		// workload (patch above) rather than touching the Pod
		Entry("may watch Pods (healer)", true, "watch", "pods", "-A"),
		Entry("may not create Pods", false, "create", "pods", "-n", "default"),
		Entry("may not update Pods", false, "update", "pods", "-n", "default"),
		Entry("may not patch Pods", false, "patch", "pods", "-n", "default"),
		Entry("may not delete Pods", false, "delete", "pods", "-n", "default"),
		Entry("may not exec into Pods", false, "create", "pods", "--subresource=exec", "-n", "default"),
		Entry("may not evict Pods", false, "create", "pods", "--subresource=eviction", "-n", "default"),
		// RBAC for the kubernetes provider: namespaced Roles only, no escalation
		Entry("may create Roles (kubernetes provider)", true, "create", "roles.rbac.authorization.k8s.io", "-n", "default"),
		Entry("may create RoleBindings (kubernetes provider)", true, "create", "rolebindings.rbac.authorization.k8s.io", "-n", "default"),
		Entry("may not escalate Roles", false, "escalate", "roles.rbac.authorization.k8s.io", "-n", "default"),
		Entry("may not bind arbitrary Roles", false, "bind", "roles.rbac.authorization.k8s.io", "-n", "default"),
		Entry("may not create ClusterRoles", false, "create", "clusterroles.rbac.authorization.k8s.io"),
		Entry("may not create ClusterRoleBindings", false, "create", "clusterrolebindings.rbac.authorization.k8s.io"),
		Entry("may not bind ClusterRoles", false, "bind", "clusterroles.rbac.authorization.k8s.io"),
		Entry("may not mint ServiceAccount tokens", false, "create", "serviceaccounts", "--subresource=token", "-n", "default"),
		Entry("may not impersonate users", false, "impersonate", "users"),
		Entry("may create TokenReviews (the sync server authenticates sidecars)", true, "create", "tokenreviews.authentication.k8s.io"),
		Entry("may create SubjectAccessReviews (secure metrics authorize their callers)", true, "create", "subjectaccessreviews.authorization.k8s.io"),
		// Events
		Entry("may create Events (events.k8s.io) on what it reconciles", true, "create", "events.events.k8s.io", "-n", "default"),
		Entry("may create core Events in its namespace (leader election)", true, "create", "events", "-n", systemNS),
		Entry("may not create core Events elsewhere", false, "create", "events", "-n", "default"),
		// leader election: its own Lease only
		Entry("may get Leases in its namespace", true, "get", "leases.coordination.k8s.io", "-n", systemNS),
		Entry("may update Leases in its namespace", true, "update", "leases.coordination.k8s.io", "-n", systemNS),
		Entry("may not delete Leases in its namespace", false, "delete", "leases.coordination.k8s.io", "-n", systemNS),
		Entry("may not update Leases in kube-system", false, "update", "leases.coordination.k8s.io", "-n", "kube-system"),
		// cluster
		Entry("may read ReferenceGrants", true, "list", "referencegrants.gateway.networking.k8s.io", "-A"),
		Entry("may not create Namespaces", false, "create", "namespaces"),
		Entry("may not delete Namespaces", false, "delete", "namespaces"),
		Entry("may not get Nodes", false, "get", "nodes"),
		Entry("may not create CRDs", false, "create", "customresourcedefinitions.apiextensions.k8s.io"),
		Entry("is not cluster-admin", false, "*", "*"),
	}
	for _, r := range deliveryGrants {
		rows = append(rows, verbRows(r)...)
	}
	return rows
}

// grant is what the manager may do with one resource: held are the verbs
// config/rbac/role.yaml grants it (from the +kubebuilder:rbac markers),
// checked is every verb the matrix asks about. A verb checked and not held
// is a "may not" row, so that a verb added to the role fails the matrix
// until it is added here too.
type grant struct {
	what, resource string
	// subresource, when set, is checked as --subresource.
	subresource string
	held        []string
	checked     []string
}

// objectVerbs are the verbs of a kind's objects.
var objectVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// deliveryGrants are the manager's permissions for staged delivery and
// history. It records a flag set's accepted specs as FeatureFlagRevisions
// and prunes them, and patches one only to adopt it when it was left
// without a controller (a patch of its ownerReferences: config/policy
// admits no other change); it never updates one. It reads the rollout
// policies teams write and writes only their status; it reads Namespaces,
// whose labels namespaceSelector steps select.
var deliveryGrants = []grant{
	{what: "FeatureFlagRevisions", resource: "featureflagrevisions.delivery.flagplane.dev",
		held: []string{"get", "list", "watch", "create", "patch", "delete"}, checked: objectVerbs},
	{what: "FeatureFlagRolloutPolicies", resource: "featureflagrolloutpolicies.delivery.flagplane.dev",
		held: []string{"get", "list", "watch"}, checked: objectVerbs},
	{what: "FeatureFlagRolloutPolicy status", resource: "featureflagrolloutpolicies.delivery.flagplane.dev", subresource: "status",
		held: []string{"get", "update", "patch"}, checked: []string{"get", "update", "patch"}},
	{what: "Namespaces", resource: "namespaces",
		held: []string{"get", "list", "watch"}, checked: []string{"get", "list", "watch", "update", "patch"}},
}

// verbRows are the matrix's rows of one grant: reads asked for every
// namespace (-A), writes in default (the manager's ClusterRole is bound
// cluster-wide, so one namespace stands for all). Namespaces, a
// cluster-scoped kind, take neither.
func verbRows(g grant) []TableEntry {
	var rows []TableEntry
	for _, verb := range g.checked {
		args := []string{verb, g.resource}
		if g.subresource != "" {
			args = append(args, "--subresource="+g.subresource)
		}
		switch {
		case g.resource == "namespaces":
		case verb == "get" || verb == "list" || verb == "watch":
			args = append(args, "-A")
		default:
			args = append(args, "-n", "default")
		}
		may := slices.Contains(g.held, verb)
		what := "may " + verb + " " + g.what
		if !may {
			what = "may not " + verb + " " + g.what
		}
		if slices.Contains(args, "-A") {
			what += " in every namespace"
		}
		params := []any{may}
		for _, a := range args {
			params = append(params, a)
		}
		rows = append(rows, Entry(what, params...))
	}
	return rows
}
