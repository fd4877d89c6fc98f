package install

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/freeport"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// teamB is the second team: installed with Helm (team-a with kustomize).
const teamB = "team-b"

// The names of a team's webhook configurations.
func teamInjector(team string) string  { return "flagplane-injector-" + team }
func teamValidator(team string) string { return "flagplane-validator-" + team }

// describeNamespaced installs the namespace-scoped mode for two teams, as
// a cluster administrator and the teams would: team-a with kustomize
// (config/namespaced, and config/namespaced/admission by the
// administrator), team-b with Helm (namespaced.enabled, both parts in one
// release). Each manager runs with its Deployment's arguments and its
// ServiceAccount's RBAC under config/default's admission policy, keeps its
// own webhook configurations' caBundle, and injects into its namespace's
// Pods and nowhere else. The CRDs and the policy are config/default's.
func describeNamespaced() {
	var other string // a namespace no team manages

	BeforeAll(func(ctx SpecContext) {
		for _, team := range []string{teamNS, teamB} {
			Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})).To(Succeed())
		}
		other = newNamespace(ctx, "other-team")
		kubectl("apply", "--server-side", "-k", filepath.Join(rootDir, "config", "namespaced"))
		kubectl("apply", "--server-side", "-k", filepath.Join(rootDir, "config", "namespaced", "admission"))
		helm("install", teamB, filepath.Join(rootDir, "charts", "flagplane"), "--namespace", teamB,
			"--set", "namespaced.enabled=true",
			// Once per cluster, and config/default has them already.
			"--set", "crds.install=false,admissionPolicy.enabled=false,rbac.aggregatedRoles=false,rbac.metricsReaderRole=false")
	})

	It("installs the team's objects as namespaced objects only, in the team's namespace", func() {
		out := kubectl("kustomize", filepath.Join(rootDir, "config", "namespaced"))
		for _, doc := range strings.Split(out, "\n---\n") {
			Expect(doc).To(ContainSubstring("namespace: "+teamNS), "every object is in the team's namespace:\n%s", doc)
			Expect(doc).NotTo(MatchRegexp(`(?m)^kind: (Cluster\w+|Namespace|CustomResourceDefinition|\w+WebhookConfiguration)$`), "no cluster-scoped object:\n%s", doc)
		}
		for _, team := range []string{teamNS, teamB} {
			for _, obj := range []string{
				"role.rbac.authorization.k8s.io/flagplane-manager",
				"rolebinding.rbac.authorization.k8s.io/flagplane-manager",
				"role.rbac.authorization.k8s.io/flagplane-manager-own-namespace",
				"deployment.apps/flagplane-manager",
				"service/flagplane-webhook",
			} {
				Expect(kubectl("get", obj, "-n", team, "-o", "name")).To(Equal(obj+"\n"), "%s of %s", obj, team)
			}
		}
	})

	It("gives each team webhook configurations that select its namespace and call its manager", func(ctx SpecContext) {
		for _, team := range []string{teamNS, teamB} {
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: teamInjector(team)}, m)).To(Succeed())
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: teamValidator(team)}, v)).To(Succeed())
			// The Pod injector and the FeatureFlag spec author; the validators.
			Expect(m.Webhooks).To(HaveLen(2))
			var selectors []*metav1.LabelSelector
			var services []*admissionregistrationv1.ServiceReference
			for _, w := range m.Webhooks {
				selectors, services = append(selectors, w.NamespaceSelector), append(services, w.ClientConfig.Service)
			}
			for _, w := range v.Webhooks {
				selectors, services = append(selectors, w.NamespaceSelector), append(services, w.ClientConfig.Service)
			}
			for _, s := range selectors {
				Expect(s.MatchExpressions).To(ContainElement(metav1.LabelSelectorRequirement{
					Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{team}}))
			}
			for _, s := range services {
				Expect(s).To(HaveValue(And(HaveField("Namespace", team), HaveField("Name", "flagplane-webhook"))))
			}
		}
	})

	It("runs each manager scoped to its own namespace, with its team's webhook configurations", func(ctx SpecContext) {
		for _, team := range []string{teamNS, teamB} {
			d := &appsv1.Deployment{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: "flagplane-manager"}, d)).To(Succeed())
			args := d.Spec.Template.Spec.Containers[0].Args
			Expect(args).To(ContainElements("--namespaces=$(POD_NAMESPACE)",
				"--mutating-webhook-configuration=flagplane-injector-$(POD_NAMESPACE)",
				"--validating-webhook-configuration=flagplane-validator-$(POD_NAMESPACE)"))
			Expect(args).NotTo(ContainElement("--webhooks=false"), "it serves its team's admission")
			Expect(d.Spec.Template.Spec.Containers[0].Env).To(ContainElement(And(
				HaveField("Name", "POD_NAMESPACE"), HaveField("ValueFrom.FieldRef.FieldPath", "metadata.namespace"))))
		}
	})

	for _, t := range []struct{ team, other string }{{teamNS, teamB}, {teamB, teamNS}} {
		DescribeTable(fmt.Sprintf("the ServiceAccount of %s's manager", t.team),
			func(want bool, args ...string) {
				manager := serviceAccount(t.team, managerSA)
				Expect(canI(manager, args...)).To(Equal(want), "kubectl auth can-i %s", strings.Join(args, " "))
			},
			Entry("may list FeatureFlags in its namespace", true, "list", "featureflags.core.openfeature.dev", "-n", t.team),
			Entry("may patch FeatureFlagSource status in its namespace", true, "patch", "featureflagsources.core.openfeature.dev", "--subresource=status", "-n", t.team),
			Entry("may create ConfigMaps in its namespace", true, "create", "configmaps", "-n", t.team),
			Entry("may watch Deployments in its namespace", true, "watch", "deployments.apps", "-n", t.team),
			Entry("may update its Lease", true, "update", "leases.coordination.k8s.io", "-n", t.team),
			Entry("may update its webhook certificate Secret", true, "update", "secrets/flagplane-webhook-cert", "-n", t.team),
			Entry("may patch its team's MutatingWebhookConfiguration (caBundle)", true, "patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/"+teamInjector(t.team)),
			Entry("may patch its team's ValidatingWebhookConfiguration (caBundle)", true, "patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/"+teamValidator(t.team)),
			Entry("may create TokenReviews (its secure metrics, system:auth-delegator)", true, "create", "tokenreviews.authentication.k8s.io"),
			Entry("may not patch the other team's MutatingWebhookConfiguration", false, "patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/"+teamInjector(t.other)),
			Entry("may not patch the other team's ValidatingWebhookConfiguration", false, "patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/"+teamValidator(t.other)),
			Entry("may not patch the cluster-wide injector", false, "patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/flagplane-injector"),
			Entry("may not create webhook configurations", false, "create", "mutatingwebhookconfigurations.admissionregistration.k8s.io"),
			Entry("may not list FeatureFlags cluster-wide", false, "list", "featureflags.core.openfeature.dev", "-A"),
			Entry("may not list FeatureFlags of the other team", false, "list", "featureflags.core.openfeature.dev", "-n", t.other),
			Entry("may not create ConfigMaps in another namespace", false, "create", "configmaps", "-n", t.other),
			Entry("may not watch Deployments cluster-wide", false, "watch", "deployments.apps", "-A"),
			Entry("may not create Roles in another namespace", false, "create", "roles.rbac.authorization.k8s.io", "-n", t.other),
			Entry("may not get Secrets in another namespace", false, "get", "secrets", "-n", t.other),
			Entry("may not create Pods", false, "create", "pods", "-n", t.team),
			Entry("may not list Namespaces", false, "list", "namespaces"),
		)
	}

	Describe("with both teams' managers running", Ordered, func() {
		managers := map[string]*installedManager{}

		BeforeAll(func(ctx SpecContext) {
			for _, team := range []string{teamNS, teamB} {
				m := runInstalled(ctx, team, nil)
				Expect(m.Options.Namespaces).To(ConsistOf(team))
				pointWebhooksAt(ctx, m.webhookBase, teamInjector(team), teamValidator(team))
				managers[team] = m
			}
		})

		It("serves each team: ready, elected, its caBundle kept, its samples reconciled and injected", func(ctx SpecContext) {
			for _, team := range []string{teamNS, teamB} {
				By(team)
				expectServing(ctx, managers[team], teamValidator(team), team)
			}
		})

		It("keeps each team's caBundle with the team's own CA", func(ctx SpecContext) {
			cas := map[string]string{}
			for _, team := range []string{teamNS, teamB} {
				m := &admissionregistrationv1.MutatingWebhookConfiguration{}
				Expect(k8s.Get(ctx, client.ObjectKey{Name: teamInjector(team)}, m)).To(Succeed())
				cas[team] = caSubject(m.Webhooks[0].ClientConfig.CABundle)
				secret := &corev1.Secret{}
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: "flagplane-webhook-cert"}, secret)).To(Succeed())
				Expect(caSubject(secret.Data["ca.crt"])).To(Equal(cas[team]), "the CA of the team's own Secret")
			}
			Expect(cas[teamNS]).NotTo(Equal(cas[teamB]))
		})

		It("injects into its namespace's Pods and nowhere else", func(ctx SpecContext) {
			// The same flag set, source and Deployment in each namespace: each
			// team's Pod gets flagd from its team's flag set; the Pod of the
			// namespace no team manages gets nothing.
			for _, ns := range []string{teamNS, teamB, other} {
				Expect(k8s.Create(ctx, fixtures.FlagSet(ns, "team-flags", "on"))).To(Succeed())
				Expect(k8s.Create(ctx, fixtures.Source(ns, "team-source", []v1beta1.Source{fixtures.FileRef("team-flags")},
					fixtures.Targeting("Deployment", "team-web")))).To(Succeed())
			}
			for _, team := range []string{teamNS, teamB} {
				Eventually(func() bool {
					_, ok := managers[team].Controller.Topology().Snapshot().Source(topology.SourceKey(team, "team-source"))
					return ok
				}).Should(BeTrue())
			}
			for _, ns := range []string{teamNS, teamB, other} {
				Expect(k8s.Create(ctx, fixtures.Deployment(ns, "team-web", nil, nil))).To(Succeed())
			}
			for _, ns := range []string{teamNS, teamB, other} {
				var pod corev1.Pod
				Eventually(func(g Gomega) {
					var pods corev1.PodList
					g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
					g.Expect(pods.Items).To(ContainElement(HaveField("ObjectMeta.Name", HavePrefix("team-web-")), &pod))
				}).Should(Succeed(), "the ReplicaSet controller creates the Pod in %s", ns)
				sidecar := sidecarOf(&pod)
				if ns == other {
					Expect(sidecar).To(BeNil(), "no team's manager injects into %s", ns)
					continue
				}
				Expect(sidecar).NotTo(BeNil(), "%s's manager injects into its Pods", ns)
				Expect(strings.Join(sidecar.Args, " ")).To(ContainSubstring(ns+"_team-flags"), "from %s's own flag set", ns)
			}
		})

		It("is never sent another namespace's Pods: the API server selects by namespace", func(ctx SpecContext) {
			// Made to fail closed, team-a's injector refuses every Pod it is
			// sent while its manager cannot answer: team-a's Pods are then
			// refused, the other namespaces' are not sent to it at all.
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: teamInjector(teamNS)}, m)).To(Succeed())
			saved := m.DeepCopy()
			m.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
			// A loopback port nothing listens on (free a moment ago).
			closed, err := freeport.Address()
			Expect(err).NotTo(HaveOccurred())
			m.Webhooks[0].ClientConfig.URL = ptr.To("https://" + closed + "/mutate-v1-pod")
			Expect(k8s.Update(ctx, m)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Eventually(func() error {
					cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
					if err := k8s.Get(ctx, client.ObjectKeyFromObject(saved), cur); err != nil {
						return err
					}
					cur.Webhooks = saved.Webhooks
					return k8s.Update(ctx, cur)
				}).Should(Succeed())
			})
			Eventually(func() error { return k8s.Create(ctx, optedInPod(teamNS, "team-source"), client.DryRunAll) }).Should(
				MatchError(ContainSubstring(`failed calling webhook "pods.flagplane.core.openfeature.dev"`)))
			for _, ns := range []string{teamB, other} {
				Consistently(func() error { return k8s.Create(ctx, optedInPod(ns, "team-source"), client.DryRunAll) }, "1s").
					Should(Succeed(), "%s's Pods are not sent to team-a's injector", ns)
			}
		})

		It("serves its metrics to an authorized scraper: the administrator's part lets it ask the API server", func(ctx SpecContext) {
			token := newServiceAccount(ctx, other, "prometheus")
			kubectl("create", "clusterrolebinding", "flagplane-metrics-reader-"+other,
				"--clusterrole=flagplane-metrics-reader", "--serviceaccount="+other+":prometheus")
			DeferCleanup(func() { kubectl("delete", "clusterrolebinding", "flagplane-metrics-reader-"+other) })
			for _, team := range []string{teamNS, teamB} {
				url := "https://" + managers[team].metricsAddr() + "/metrics"
				Eventually(func() int { return answerTo(url, token).Status }).Should(Equal(http.StatusOK), team)
				Expect(answerTo(url, "")).To(HaveField("Status", http.StatusUnauthorized), team)
			}
		})

		It("leaves the other team's namespace alone: no ConfigMap, no status", func(ctx SpecContext) {
			for _, t := range []struct{ team, other string }{{teamNS, other}, {teamB, other}} {
				Expect(managers[t.team].Controller.Topology().Snapshot().Sources()).NotTo(ContainElement(topology.SourceKey(t.other, "team-source")))
			}
			theirs := client.ObjectKey{Namespace: other, Name: topology.ConfigMapName(topology.FlagSetKey(other, "team-flags"))}
			Consistently(func() bool {
				err := k8s.Get(ctx, theirs, &corev1.ConfigMap{})
				Expect(client.IgnoreNotFound(err)).To(Succeed())
				return err == nil
			}).Should(BeFalse())
			s := &v1beta1.FeatureFlagSource{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: other, Name: "team-source"}, s)).To(Succeed())
			Expect(s.Status.Conditions).To(BeEmpty())
		})
	})
}

// optedInPod is a bare Pod that opts in to a source the OpenFeature
// Operator's way (annotations).
func optedInPod(ns, source string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "opted-in-", Annotations: map[string]string{
			"openfeature.dev/enabled": "true", "openfeature.dev/featureflagsource": source}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

// sidecarOf is the injected flagd of pod, or nil.
func sidecarOf(pod *corev1.Pod) *corev1.Container {
	for i, c := range pod.Spec.InitContainers {
		if c.Name == injection.SidecarName {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// caSubject is the subject of the first certificate of a PEM bundle.
func caSubject(bundle []byte) string {
	GinkgoHelper()
	block, _ := pem.Decode(bundle)
	Expect(block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return c.Subject.String() + " " + c.SerialNumber.String()
}

// helm runs the suite's helm against the control plane, with its own
// configuration and cache (the host's stay out of the tests).
func helm(args ...string) string {
	GinkgoHelper()
	home := filepath.Join(cp.Dir, "helm")
	cmd := exec.Command(helmPath(), append(args, "--kubeconfig", cp.KubeconfigPath)...)
	cmd.Env = append(cmd.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
	return string(out)
}
