package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/history"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// describeManager runs the manager in the test process but with exactly
// the RBAC that config/default gives its ServiceAccount (it impersonates it),
// admission included: a missing permission shows up here as a manager that
// never gets ready, a ConfigMap that never appears, a status never written or
// a Pod without its sidecar.
func describeManager() {
	var (
		mgr       *runningManager
		metricsIP string
		ipErr     error
		shop      string
		// scrapers holds two ServiceAccounts: prometheus, bound to the
		// ClusterRole flagplane-metrics-reader, and nobody, bound to nothing.
		scrapers                 string
		readerToken, nobodyToken string
	)
	// metricsURL is the URL of path on the manager's secure metrics server.
	metricsURL := func(path string) string { return "https://" + mgr.metricsAddr() + path }

	BeforeAll(func(ctx SpecContext) {
		metricsIP, ipErr = externalIP()
		if ipErr != nil {
			metricsIP = "127.0.0.1"
		}
		// The Pods of the manager Deployment never run here (no kubelet), and
		// the API server reaches a webhook Service through its ClusterIP,
		// which nothing routes: the installed webhook configurations are
		// pointed at this process by URL instead. Everything else about
		// them, the caBundle the manager injects included, is as installed.
		DeferCleanup(func() {
			// A later section installs no webhook: these must not outlive this one.
			kubectl("delete", "mutatingwebhookconfiguration", "flagplane-injector")
			kubectl("delete", "validatingwebhookconfiguration", "flagplane-validator")
		})
		opts := app.DefaultOptions()
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = systemNS
		// A port the manager picks and reports.
		opts.WebhookHost, opts.WebhookPort = "127.0.0.1", 0
		opts.Admission.Namespace = systemNS
		opts.Admission.ExtraDNSNames = []string{opts.WebhookHost}
		// The sync server as config/default turns it on: its key Secret,
		// which this manager creates (it does not exist yet), and the
		// address flagd-proxy sidecars are pointed at.
		opts.Sync.BindAddress = "127.0.0.1:0"
		opts.Sync.NamespaceTokenKeySecret = syncserver.DefaultNamespaceTokenKeySecret
		opts.Sync.SecretNamespace = systemNS
		opts.Admission.Injection.SyncServer = "flagplane-sync." + systemNS + ".svc:8015"
		mgr = startManager(impersonating(systemNS, managerSA), metricsIP, opts)
		pointWebhooksAt(ctx, "https://"+mgr.Addresses().Webhook, "flagplane-injector", "flagplane-validator")
		shop = newNamespace(ctx, "shop")

		scrapers = newNamespace(ctx, "scrapers")
		readerToken = newServiceAccount(ctx, scrapers, "prometheus")
		nobodyToken = newServiceAccount(ctx, scrapers, "nobody")
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "flagplane-metrics-reader-" + scrapers},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flagplane-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: scrapers}},
		}
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, binding))).To(Succeed()) })
	})

	It("becomes ready once its topology is built, and is elected leader", func(ctx SpecContext) {
		Eventually(httpStatus("http://" + mgr.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
		Expect(httpStatus("http://" + mgr.probeAddr + "/healthz")()).To(Equal(http.StatusOK))
		Eventually(mgr.Elected()).Should(BeClosed())
		lease := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane.core.openfeature.dev"}, lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty())
	})

	It("keeps its webhook certificate and injects the caBundle, so that the API server calls its validators", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			secret := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-webhook-cert"}, secret)).To(Succeed())
			g.Expect(secret.Data).To(HaveKey("tls.crt"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-validator"}, v)).To(Succeed())
			for _, w := range v.Webhooks {
				g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), w.Name)
			}
		}).Should(Succeed())
		// An invalid flag set is refused by the validator, with its reason.
		bad := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "bad"}}
		bad.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
			"f": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "maybe"},
		}
		Eventually(func() error { return k8s.Create(ctx, bad, client.DryRunAll) }).Should(
			MatchError(And(ContainSubstring("admission webhook"), ContainSubstring("maybe"))))
	})

	It("reconciles the samples: the ConfigMap, status on the flag set and the source, and flagd injected into the Pods", func(ctx SpecContext) {
		samples := filepath.Join(rootDir, "config", "samples")
		// The source first, so that the first Pod is admitted with it in the graph.
		kubectl("apply", "-n", shop, "-f", filepath.Join(samples, "featureflag.yaml"), "-f", filepath.Join(samples, "featureflagsource.yaml"))
		Eventually(func() bool {
			_, ok := mgr.Controller.Topology().Snapshot().Source(topology.SourceKey(shop, "shop"))
			return ok
		}).Should(BeTrue())
		kubectl("apply", "-n", shop, "-f", filepath.Join(samples, "deployment.yaml"))

		flags := topology.FlagSetKey(shop, "shop-flags")
		Eventually(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: topology.ConfigMapName(flags)}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue(topology.ConfigMapDataKey(flags), ContainSubstring(`"new-checkout"`)))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			s := &v1beta1.FeatureFlagSource{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop"}, s)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "%+v", s.Status.Conditions)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			ff := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flags"}, ff)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionAccepted)).To(BeTrue(), "%+v", ff.Status.Conditions)
		}).Should(Succeed())
		// The ReplicaSet controller's Pod went through the installed
		// MutatingWebhookConfiguration: flagd as a native sidecar, with the
		// manager's default sidecar image.
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(shop), client.MatchingLabels{"app": "shop-web"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			g.Expect(pods.Items[0].Spec.InitContainers).To(ContainElement(And(
				HaveField("Name", injection.SidecarName),
				HaveField("Image", app.DefaultOptions().Sidecar.ImageReference()),
				HaveField("RestartPolicy", HaveValue(Equal(corev1.ContainerRestartPolicyAlways))),
			)))
		}).Should(Succeed())
	})

	It("records the revision history under the admission policy: creates a FeatureFlag's revisions, adopts an orphaned one and prunes it", func(ctx SpecContext) {
		ff := fixtures.FlagSet(shop, "recorded", "on")
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "1"}
		Expect(k8s.Create(ctx, ff)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
			g.Expect(ff.Status.Revision).NotTo(BeEmpty())
		}).Should(Succeed())
		revisionsOf := func(g Gomega) []*deliveryv1alpha1.FeatureFlagRevision {
			var list deliveryv1alpha1.FeatureFlagRevisionList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(shop), client.MatchingLabels{deliveryv1alpha1.FlagSetLabel: "recorded"})).To(Succeed())
			return history.Sorted(list.Items)
		}
		Eventually(func(g Gomega) {
			revs := revisionsOf(g)
			g.Expect(revs).To(HaveLen(1), "created by the manager, as its ServiceAccount")
			g.Expect(metav1.IsControlledBy(revs[0], ff)).To(BeTrue())
		}).Should(Succeed())

		// A revision of its content left without a controller (as by
		// `kubectl delete --cascade=orphan` of an earlier FeatureFlag of
		// the name), numbered after the manager's: adopted (a patch of its
		// ownerReferences), and then the newest revision of the content
		// served, so that revision 1 is pruned to the limit of 1.
		orphan := history.Desired(ff, ff.Status.Revision, 7, "", true)
		orphan.OwnerReferences = nil
		Expect(k8s.Create(ctx, orphan)).To(Succeed())
		Eventually(func(g Gomega) {
			revs := revisionsOf(g)
			g.Expect(revs).To(HaveLen(1))
			g.Expect(revs[0].Spec.Number).To(Equal(int64(7)))
			g.Expect(metav1.IsControlledBy(revs[0], ff)).To(BeTrue(), "adopted")
		}).Should(Succeed())
	})

	It("takes a FeatureFlagRolloutPolicy, its promotion and its pause from a namespace's editor, and refuses editors and admins its status and every write of a revision", func(ctx SpecContext) {
		ns := newNamespace(ctx, "team")
		kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", ns)
		kubectl("create", "rolebinding", "dana-admin", "--clusterrole=admin", "--user=dana", "-n", ns)
		Expect(k8s.Create(ctx, fixtures.FlagSet(ns, "checkout", "on"))).To(Succeed())
		By("the manager recording the flag set's first revision")
		var revs deliveryv1alpha1.FeatureFlagRevisionList
		Eventually(func(g Gomega) {
			g.Expect(k8s.List(ctx, &revs, client.InNamespace(ns))).To(Succeed())
			g.Expect(revs.Items).To(HaveLen(1))
		}).Should(Succeed())
		rev := revs.Items[0]
		Eventually(func() bool { return canI("alice", "create", rolloutPolicies, "-n", ns) }).Should(BeTrue())
		Eventually(func() bool { return canI("dana", "create", rolloutPolicies, "-n", ns) }).Should(BeTrue())

		By("the editor writing a policy, promoting, pausing")
		policy := fmt.Sprintf(`{"apiVersion":"delivery.flagplane.dev/v1alpha1","kind":"FeatureFlagRolloutPolicy","metadata":{"name":"checkout","namespace":%q},`+
			`"spec":{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"checkout"},"steps":[{"percentage":50,"approval":true},{"percentage":100}]}}`, ns)
		path := filepath.Join(GinkgoT().TempDir(), "policy.json")
		Expect(os.WriteFile(path, []byte(policy), 0o600)).To(Succeed())
		kubectl("create", "-f", path, "--as=alice")
		kubectl("annotate", "featureflagrolloutpolicy", "checkout", "-n", ns, "--as=alice", deliveryv1alpha1.PromoteAnnotation+"=x/1/0")
		kubectl("patch", "featureflagrolloutpolicy", "checkout", "-n", ns, "--as=alice", "--type=merge", "-p", `{"spec":{"paused":true}}`)
		Expect(kubectl("get", "featureflagrolloutpolicy", "checkout", "-n", ns, "-o", "jsonpath={.spec.paused}")).To(Equal("true"))

		forbidden := func(args ...string) {
			GinkgoHelper()
			out, err := cp.Kubectl(args...)
			Expect(err).To(HaveOccurred(), "kubectl %s", strings.Join(args, " "))
			Expect(fmt.Sprint(out, err)).To(ContainSubstring("forbidden"), "kubectl %s", strings.Join(args, " "))
		}
		By("refusing the editor and the admin the policy's status")
		for _, user := range []string{"--as=alice", "--as=dana"} {
			forbidden("patch", "featureflagrolloutpolicy", "checkout", "-n", ns, user, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Completed"}}`)
		}

		By("refusing them every write of a revision: a forged one, a label, a change, a deletion")
		forged := rev.DeepCopy()
		forged.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: rev.Name + "-forged"}
		forged.APIVersion, forged.Kind = deliveryv1alpha1.GroupVersion.String(), "FeatureFlagRevision"
		b, err := json.Marshal(forged)
		Expect(err).NotTo(HaveOccurred())
		forgedPath := filepath.Join(GinkgoT().TempDir(), "revision.json")
		Expect(os.WriteFile(forgedPath, b, 0o600)).To(Succeed())
		for _, user := range []string{"--as=alice", "--as=dana"} {
			forbidden("create", "-f", forgedPath, user)
			forbidden("label", "featureflagrevision", rev.Name, "-n", ns, user, "forged=true")
			forbidden("patch", "featureflagrevision", rev.Name, "-n", ns, user, "--type=merge", "-p", `{"spec":{"changeCause":"forged"}}`)
			forbidden("delete", "featureflagrevision", rev.Name, "-n", ns, user)
			forbidden("delete", "featureflagrevisions", "--all", "-n", ns, user)
		}
		after := &deliveryv1alpha1.FeatureFlagRevision{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&rev), after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(rev.ResourceVersion), "the revision is as the manager wrote it")

		By("the editor deleting the policy")
		kubectl("delete", "featureflagrolloutpolicy", "checkout", "-n", ns, "--as=alice")
	})

	It("generates its sync server's key Secret, and injects flagd-proxy sidecars with its namespace token", func(ctx SpecContext) {
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: syncserver.DefaultNamespaceTokenKeySecret}, secret)).To(Succeed(),
			"the manager created it at start, with its own RBAC")
		keys := secret.Data[syncserver.NamespaceTokenKeySecretKey]
		Expect(len(strings.TrimSpace(string(keys)))).To(BeNumerically(">=", syncserver.MinKeyLen))
		Expect(mgr.Sync).NotTo(BeNil())
		token, err := mgr.Sync.NamespaceTokens().Issue(shop)
		Expect(err).NotTo(HaveOccurred())

		ff := fixtures.FlagSet(shop, "proxied", "on")
		web := fixtures.Deployment(shop, "proxied-web", nil, nil)
		src := fixtures.Source(shop, "proxied", []v1beta1.Source{{Source: "proxied", Provider: v1beta1.SyncProviderFlagdProxy}},
			fixtures.Targeting("Deployment", "proxied-web"))
		for _, o := range []client.Object{ff, src} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}
		Eventually(func() bool {
			_, ok := mgr.Controller.Topology().Snapshot().Source(topology.SourceKey(shop, "proxied"))
			return ok
		}).Should(BeTrue())
		Expect(k8s.Create(ctx, web)).To(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(shop), client.MatchingLabels(web.Spec.Selector.MatchLabels))).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			var sidecar *corev1.Container
			for i, c := range pods.Items[0].Spec.InitContainers {
				if c.Name == injection.SidecarName {
					sidecar = &pods.Items[0].Spec.InitContainers[i]
				}
			}
			g.Expect(sidecar).NotTo(BeNil(), "flagd-proxy works out of the box")
			g.Expect(strings.Join(sidecar.Args, " ")).To(And(
				ContainSubstring(`"uri":"flagplane-sync.`+systemNS+`.svc:8015"`),
				ContainSubstring(`"selector":"core.openfeature.dev/`+shop+`/proxied"`),
				ContainSubstring(token)))
		}).Should(Succeed())
	})

	It("grants a workload of the kubernetes provider what flagd's kubernetes sync needs in its namespace only, without escalate or bind", func(ctx SpecContext) {
		ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "watched-flags"}}
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
			"dark-mode": {State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"},
		}
		labels := map[string]string{"app": "reader"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "reader"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{ServiceAccountName: "reader",
						Containers: []corev1.Container{{Name: "app", Image: "app"}}},
				},
			},
		}
		src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "watcher"}}
		src.Spec.Sources = []v1beta1.Source{{Source: "watched-flags", Provider: v1beta1.SyncProviderKubernetes}}
		src.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "reader"}}
		for _, o := range []client.Object{ff, d, src} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}
		name := rbac.Name(topology.WorkloadKey(topology.KindDeployment, shop, "reader"))
		Eventually(func(g Gomega) {
			role := &rbacv1.Role{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: name}, role)).To(Succeed())
			g.Expect(role.Rules).To(ConsistOf(
				And(HaveField("Verbs", ConsistOf("get")), HaveField("ResourceNames", ConsistOf("watched-flags"))),
				And(HaveField("Verbs", ConsistOf("list", "watch")), HaveField("ResourceNames", BeEmpty())),
			))
			rb := &rbacv1.RoleBinding{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: name}, rb)).To(Succeed())
			g.Expect(rb.Subjects).To(ConsistOf(HaveField("Name", "reader")))
		}).Should(Succeed())
		Expect(canI(serviceAccount(shop, "reader"), "get", "featureflags.core.openfeature.dev/watched-flags", "-n", shop)).To(BeTrue())
		Expect(canI(serviceAccount(shop, "reader"), "get", "featureflags.core.openfeature.dev/shop-flags", "-n", shop)).To(BeFalse())
		Expect(canI(serviceAccount(shop, "reader"), "list", "featureflags.core.openfeature.dev", "-n", shop)).To(BeTrue(), "flagd's informer lists them")
		Expect(canI(serviceAccount(shop, "reader"), "watch", "featureflags.core.openfeature.dev", "-n", shop)).To(BeTrue())
		Expect(canI(serviceAccount(shop, "reader"), "list", "featureflags.core.openfeature.dev", "-A")).To(BeFalse(), "never cluster-wide")
	})

	It("does under the admission policy all its workflows write: ConfigMap updates and deletions, RBAC grants and their removal, rollout restarts", func(ctx SpecContext) {
		ns := newNamespace(ctx, "confined")
		checkout, watched := fixtures.FlagSet(ns, "checkout", "on"), fixtures.FlagSet(ns, "watched", "on")
		web, db, agent := fixtures.Deployment(ns, "web", nil, nil), fixtures.StatefulSet(ns, "db"), fixtures.DaemonSet(ns, "agent")
		src := fixtures.Source(ns, "flags",
			[]v1beta1.Source{fixtures.FileRef("checkout"), {Source: "watched", Provider: v1beta1.SyncProviderKubernetes}},
			fixtures.Targeting("Deployment", "web"), fixtures.Targeting("StatefulSet", "db"), fixtures.Targeting("DaemonSet", "agent"),
			func(s *v1beta1.FeatureFlagSource) { s.Spec.RolloutOnChange = ptr.To(true) })
		for _, o := range []client.Object{checkout, watched, src, web, db, agent} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}
		cmKey := client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(topology.FlagSetKey(ns, "checkout"))}
		dataKey := topology.ConfigMapDataKey(topology.FlagSetKey(ns, "checkout"))
		grants := []string{
			rbac.Name(topology.WorkloadKey(topology.KindDeployment, ns, "web")),
			rbac.Name(topology.WorkloadKey(topology.KindStatefulSet, ns, "db")),
			rbac.Name(topology.WorkloadKey(topology.KindDaemonSet, ns, "agent")),
		}
		grantsExist := func(g Gomega) []bool {
			var have []bool
			for _, name := range grants {
				key := client.ObjectKey{Namespace: ns, Name: name}
				role, rb := k8s.Get(ctx, key, &rbacv1.Role{}), k8s.Get(ctx, key, &rbacv1.RoleBinding{})
				g.Expect(client.IgnoreNotFound(role)).To(Succeed())
				g.Expect(client.IgnoreNotFound(rb)).To(Succeed())
				have = append(have, role == nil, rb == nil)
			}
			return have
		}

		By("creating the ConfigMap, and a Role and RoleBinding per workload")
		Eventually(func() error { return k8s.Get(ctx, cmKey, &corev1.ConfigMap{}) }).Should(Succeed())
		Eventually(grantsExist).Should(HaveEach(BeTrue()))

		By("updating the ConfigMap when a flag changes")
		update := func(obj client.Object, change func()) {
			GinkgoHelper()
			Eventually(func() error {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return err
				}
				change()
				return k8s.Update(ctx, obj)
			}).Should(Succeed())
		}
		update(checkout, func() {
			f := checkout.Spec.FlagSpec.Flags[fixtures.FlagKey]
			f.DefaultVariant = "off"
			checkout.Spec.FlagSpec.Flags[fixtures.FlagKey] = f
		})
		Eventually(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, cmKey, cm)).To(Succeed())
			g.Expect(cm.Data[dataKey]).To(ContainSubstring(`"defaultVariant":"off"`))
		}).Should(Succeed())

		By("restarting the workloads whose pods got another injection than they would get now (rolloutOnChange)")
		update(src, func() { src.Spec.DebugLogging = ptr.To(true) })
		// The DaemonSet has no pods here (this control plane has no node), so
		// nothing of it runs an old injection: it is not restarted. The
		// policy rows show a DaemonSet restart admitted for the manager.
		for _, w := range []client.Object{web, db} {
			Eventually(func(g Gomega) map[string]string {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
				switch w := w.(type) {
				case *appsv1.Deployment:
					return w.Spec.Template.Annotations
				case *appsv1.StatefulSet:
					return w.Spec.Template.Annotations
				case *appsv1.DaemonSet:
					return w.Spec.Template.Annotations
				}
				return nil
			}).Should(HaveKey(restarts.RestartedAtAnnotation), "%T %s", w, w.GetName())
		}

		By("deleting the Roles and RoleBindings no workload needs any more")
		update(src, func() { src.Spec.Sources = src.Spec.Sources[:1] })
		Eventually(grantsExist).Should(HaveEach(BeFalse()))

		By("deleting the ConfigMap no workload uses any more")
		Expect(k8s.Delete(ctx, src)).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, cmKey, &corev1.ConfigMap{}) }).Should(WithTransform(apierrors.IsNotFound, BeTrue()))
	})

	It("writes a Flagd's objects under the admission policy: its Deployment, Service, Ingress, HTTPRoute and RBAC, their updates, and their removal", func(ctx SpecContext) {
		ns := newNamespace(ctx, "flagd")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags"), {Source: "watched", Provider: v1beta1.SyncProviderKubernetes}})
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}}
		fd.Spec.FeatureFlagSource = "src"
		fd.Spec.Ingress.Enabled = true
		fd.Spec.GatewayApiRoutes.Enabled = true
		for _, o := range []client.Object{fixtures.FlagSet(ns, "flags", "on"), fixtures.FlagSet(ns, "watched", "on"), src, fd} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
		}
		rbacName := rbac.Name(topology.FlagdKey(ns, "flagd"))
		route := &metav1.PartialObjectMetadata{}
		route.SetGroupVersionKind(flagds.HTTPRouteGVK)
		children := []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &networkingv1.Ingress{}, route}
		Eventually(func(g Gomega) {
			for _, o := range children {
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, o)).To(Succeed(), "%T", o)
			}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbacName}, &rbacv1.RoleBinding{})).To(Succeed())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fd), fd)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(fd.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "%v", fd.Status.Conditions)
		}).Should(Succeed())

		By("applying a source edit to the Deployment")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
				return err
			}
			src.Spec.Port = 9013
			src.Spec.Sources = src.Spec.Sources[:1]
			return k8s.Update(ctx, src)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("9013"))
		}).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbacName}, &rbacv1.Role{}) }).
			Should(WithTransform(apierrors.IsNotFound, BeTrue()), "the kubernetes entry's grant goes with it")

		By("deleting the Ingress and HTTPRoute it no longer asks for")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(fd), fd); err != nil {
				return err
			}
			fd.Spec.Ingress.Enabled, fd.Spec.GatewayApiRoutes.Enabled = false, false
			return k8s.Update(ctx, fd)
		}).Should(Succeed())
		for _, o := range []client.Object{&networkingv1.Ingress{}, route} {
			Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, o) }).
				Should(WithTransform(apierrors.IsNotFound, BeTrue()), "%T", o)
		}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fd), fd)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(fd.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue(), "%v", fd.Status.Conditions)
		}).Should(Succeed())
	})

	It("serves Prometheus metrics: events, deltas, reconcile latency, writes, graph nodes, queue depth, controller-runtime's per workflow", func() {
		Eventually(func() (string, error) { return securedGet(metricsURL("/metrics"), readerToken) }).Should(And(
			ContainSubstring(`flagplane_events_total{event="created",kind="FeatureFlag"}`),
			ContainSubstring(`flagplane_delta_size_count`),
			ContainSubstring(`flagplane_reconcile_duration_seconds_bucket{result="success",workflow="configmaps"`),
			ContainSubstring(`flagplane_writes_total{kind="ConfigMap"`),
			MatchRegexp(`flagplane_topology_nodes\{kind="FeatureFlag"\} [1-9]`),
			MatchRegexp(`flagplane_topology_nodes\{kind="Deployment"\} [1-9]`),
			ContainSubstring(`workqueue_depth{controller="configmaps",name="configmaps"`),
			MatchRegexp(`controller_runtime_reconcile_total\{controller="configmaps",result="success"\} [1-9]`),
			MatchRegexp(`flagplane_edit_delivered_seconds_count\{path="configmap"\} [1-9]`),
			MatchRegexp(`controller_runtime_max_concurrent_reconciles\{controller="status"\} [1-9]`),
			ContainSubstring(`leader_election_master_status{name="flagplane.core.openfeature.dev"} 1`),
		))
	})

	It("serves its topology as Graphviz DOT at /debug/topology", func() {
		req, err := http.NewRequest(http.MethodGet, metricsURL(app.TopologyPath), nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+readerToken)
		resp, err := metricsClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(resp.Header.Get("Content-Type")).To(HavePrefix("text/vnd.graphviz"))
		Expect(resp.Header.Get("Flagplane-Topology-Built")).To(Equal("true"))
		Expect(string(body)).To(HavePrefix("digraph topology {"))
		Expect(string(body)).To(ContainSubstring(fmt.Sprintf(`"featureflagsource:%s/shop" -> "deployment:%s/shop-web"`, shop, shop)))
	})

	DescribeTable("answers /metrics and /debug/topology only to callers the API server authenticates and authorizes",
		func(path string) {
			url := metricsURL(path)
			By("plain HTTP: not served")
			if status, _, err := bearerGet(strings.Replace(url, "https://", "http://", 1), readerToken); err == nil {
				Expect(status).To(Equal(http.StatusBadRequest), "an HTTPS server answers plain HTTP with 400 at most")
			}
			By("no token: 401")
			Expect(answerTo(url, "")).To(And(HaveField("Status", http.StatusUnauthorized), HaveField("Body", ContainSubstring("Unauthorized"))))
			By("a token the API server does not know: refused")
			// controller-runtime's filter answers 500 "Authentication failed"
			// when the TokenReview says "not authenticated" with an error
			// (e.g. "invalid bearer token"), 401 when it says so without one.
			Expect(answerTo(url, "forged."+readerToken)).To(Or(
				HaveField("Status", http.StatusUnauthorized),
				And(HaveField("Status", http.StatusInternalServerError), HaveField("Body", ContainSubstring("Authentication failed")))))
			By("a valid ServiceAccount token without get on the path: 403")
			Expect(answerTo(url, nobodyToken)).To(And(HaveField("Status", http.StatusForbidden),
				HaveField("Body", ContainSubstring("Authorization denied for user "+serviceAccount(scrapers, "nobody")))))
			By("a ServiceAccount token bound to flagplane-metrics-reader: 200")
			Expect(answerTo(url, readerToken)).To(And(HaveField("Status", http.StatusOK), HaveField("Body", Not(BeEmpty()))))
		},
		Entry("/metrics", "/metrics"),
		Entry("/debug/topology", app.TopologyPath),
	)

	It("cannot be read through the API server's service proxy, which does not pass the caller's credentials on", func(ctx SpecContext) {
		if ipErr != nil {
			Skip("the service proxy forwards only to non-loopback addresses and this machine has none: " + ipErr.Error())
		}
		// The manager's Pods never run here (no kubelet). One of them is
		// given the address of the manager of this test process, and
		// flagplane-metrics an EndpointSlice to it, as the kubelet and the
		// EndpointSlice controller would do: the API server proxies only to
		// the address of a Pod that a Service's endpoint refers to.
		host, portStr, err := net.SplitHostPort(mgr.metricsAddr())
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(portStr)
		Expect(err).NotTo(HaveOccurred())
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(systemNS),
			client.MatchingLabels{"app.kubernetes.io/name": "flagplane", "app.kubernetes.io/component": "manager"})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		pod := &pods.Items[0]
		pod.Status.PodIP, pod.Status.PodIPs = host, []corev1.PodIP{{IP: host}}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "flagplane-metrics-test",
				Labels: map[string]string{discoveryv1.LabelServiceName: "flagplane-metrics", discoveryv1.LabelManagedBy: "flagplane-install-suite"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{host},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: systemNS, Name: pod.Name, UID: pod.UID},
			}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
		}
		Expect(k8s.Create(ctx, slice)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, slice))).To(Succeed()) })

		// Even an administrator, who may get services/proxy: the API server
		// authenticates the caller, drops the Authorization header and
		// forwards the request with no credentials of its own, so the
		// manager answers 401, which the API server hands back.
		cs, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		var body []byte
		Eventually(func() error {
			body, err = cs.CoreV1().Services(systemNS).ProxyGet("https", "flagplane-metrics", "https", app.TopologyPath, nil).DoRaw(ctx)
			return err
		}).Should(WithTransform(apierrors.IsUnauthorized, BeTrue()))
		Expect(string(body)).To(Equal("Unauthorized\n"), "the manager's answer, relayed")
	})

	It("has its topology built by `flagplane topology --kubeconfig` from the API, as the manager built it", func(ctx SpecContext) {
		// The same objects give the same graph, byte for byte: the CLI
		// builds it with the code the manager uses, from what the user may list.
		out := filepath.Join(GinkgoT().TempDir(), "topology.dot")
		Eventually(func(g Gomega) {
			b, err := exec.CommandContext(ctx, cliPath, "topology", "--kubeconfig", cp.KubeconfigPath, "-o", out).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", b)
			fromCLI, err := os.ReadFile(out)
			g.Expect(err).NotTo(HaveOccurred())
			served, err := securedGet(metricsURL(app.TopologyPath), readerToken)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(fromCLI)).To(Equal(served))
		}).Should(Succeed())
		Expect(os.ReadFile(out)).To(ContainSubstring(fmt.Sprintf(`"featureflagsource:%s/shop" -> "deployment:%s/shop-web"`, shop, shop)))

		// SVG is drawn by the CLI itself: no Graphviz on the machine.
		svg := filepath.Join(GinkgoT().TempDir(), "topology.svg")
		cmd := exec.CommandContext(ctx, cliPath, "topology", "--kubeconfig", cp.KubeconfigPath,
			"--namespaces", shop, "--format", "svg", "-o", svg)
		cmd.Env = append(os.Environ(), "PATH=")
		b, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		Expect(os.ReadFile(svg)).To(And(ContainSubstring("<svg"), ContainSubstring(">"+shop+"/shop-web</text>")))
	})

	It("has `flagplane explain --kubeconfig` say, from the API, why the sample workload gets its flags and what the flag set reaches", func(ctx SpecContext) {
		b, err := exec.CommandContext(ctx, cliPath, "explain", "deployment/shop-web", "-n", shop, "--kubeconfig", cp.KubeconfigPath, "-o", "json").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		var workload struct {
			Sources []struct {
				Source string
				Why    []string
			} `json:"sources"`
			FlagSets []struct{ FlagSet, Provider, ConfigMap string } `json:"flagSets"`
			Sidecar  *struct{ Image string }                         `json:"sidecar"`
		}
		Expect(json.Unmarshal(b, &workload)).To(Succeed(), "%s", b)
		Expect(workload.Sources).To(ConsistOf(And(HaveField("Source", shop+"/shop"), HaveField("Why", ContainElement(ContainSubstring("targetRefs"))))))
		Expect(workload.FlagSets).To(ContainElement(And(HaveField("FlagSet", shop+"/shop-flags"), HaveField("Provider", "file"),
			HaveField("ConfigMap", shop+"/flagd."+shop+".shop-flags"))))
		Expect(workload.Sidecar).NotTo(BeNil())

		b, err = exec.CommandContext(ctx, cliPath, "explain", "ff/shop-flags", "-n", shop, "--kubeconfig", cp.KubeconfigPath).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		Expect(string(b)).To(And(ContainSubstring("Deployment "+shop+"/shop-web"), ContainSubstring(shop+"/flagd."+shop+".shop-flags")))
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "flagd." + shop + ".shop-flags"}, cm)).To(Succeed(),
			"the ConfigMap the explanation names is the one the manager wrote")
	})

	It("has `flagplane explain` take its namespace from the kubeconfig's context, complete names from the API, and run as `kubectl flagplane`", func(ctx SpecContext) {
		// A kubeconfig whose context names the shop namespace, as after
		// kubectl config set-context --current --namespace.
		cfg, err := clientcmd.LoadFromFile(cp.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Contexts).To(HaveKey(cfg.CurrentContext))
		cfg.Contexts[cfg.CurrentContext].Namespace = shop
		inShop := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(clientcmd.WriteToFile(*cfg, inShop)).To(Succeed())
		env := append(os.Environ(), "KUBECONFIG="+inShop)

		cmd := exec.CommandContext(ctx, cliPath, "explain", "deployment/shop-web")
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		Expect(string(b)).To(And(HavePrefix("Deployment "+shop+"/shop-web\n"), ContainSubstring("FeatureFlag "+shop+"/shop-flags")))

		cmd = exec.CommandContext(ctx, cliPath, "explain", "deployment/shop-web", "--kubeconfig", cp.KubeconfigPath)
		cmd.Env = append(os.Environ(), "KUBECONFIG=")
		b, err = cmd.CombinedOutput()
		Expect(err).To(HaveOccurred(), "the control plane's context names no namespace: default")
		Expect(string(b)).To(And(ContainSubstring("Deployment default/shop-web is not in the graph (it does not exist, or you may not list it); "),
			MatchRegexp(`there (is one in namespace |are some in namespaces [^:]*)\b`+shop+`\b.*: give -n`)))

		cmd = exec.CommandContext(ctx, cliPath, "__complete", "explain", "deployment/shop-")
		cmd.Env = env
		b, err = cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(Equal("deployment/shop-web\n:4\n"), "the names of the context's namespace, from the API")

		// kubectl runs the CLI as its plugin kubectl-flagplane, from PATH.
		plugins := GinkgoT().TempDir()
		Expect(os.Symlink(cliPath, filepath.Join(plugins, "kubectl-flagplane"))).To(Succeed())
		cmd = exec.CommandContext(ctx, cp.KubectlPath, "flagplane", "explain", "ff/shop-flags", "-o", "json")
		cmd.Env = slices.Concat(env, []string{"PATH=" + plugins + string(os.PathListSeparator) + os.Getenv("PATH"), "KUBERC=off"})
		b, err = cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		var flagSet struct {
			Object  string
			Reaches struct{ Workloads []string }
		}
		Expect(json.Unmarshal(b, &flagSet)).To(Succeed(), "%s", b)
		Expect(flagSet.Object).To(Equal("FeatureFlag " + shop + "/shop-flags"))
		Expect(flagSet.Reaches.Workloads).To(ContainElement("Deployment " + shop + "/shop-web"))
	})

	It("has `flagplane topology` read only what its user may read", func(ctx SpecContext) {
		// bob may view the shop namespace (the built-in view role, which
		// flagplane's viewer role is aggregated into), nothing else.
		bob := userKubeconfig("bob")
		kubectl("create", "rolebinding", "bob-view", "--clusterrole=view", "--user=bob", "-n", shop)
		Eventually(func() bool { return canI("bob", "list", "featureflagsources.core.openfeature.dev", "-n", shop) }).Should(BeTrue())

		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, cliPath, "topology", "--kubeconfig", bob)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		Expect(cmd.Run()).NotTo(Succeed(), "bob may not list cluster-wide")
		Expect(stderr.String()).To(And(ContainSubstring("forbidden"), ContainSubstring("--namespaces")))

		stdout.Reset()
		stderr.Reset()
		cmd = exec.CommandContext(ctx, cliPath, "topology", "--kubeconfig", bob, "--namespaces", shop)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		Expect(cmd.Run()).To(Succeed(), stderr.String())
		Expect(stdout.String()).To(ContainSubstring(fmt.Sprintf(`"featureflagsource:%s/shop" -> "deployment:%s/shop-web"`, shop, shop)))
		Expect(stderr.String()).To(ContainSubstring("warning: not reading referencegrants.gateway.networking.k8s.io in namespace "+shop),
			"view does not cover ReferenceGrants: the CLI says what the graph lacks")
	})

	It("has its topology read by `flagplane topology --url` with a token, and says why without one", func(ctx SpecContext) {
		b, err := exec.CommandContext(ctx, cliPath, "topology", "--url", metricsURL(""), "--token", readerToken,
			"--insecure-skip-tls-verify").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		Expect(string(b)).To(HavePrefix("digraph topology {"))

		b, err = exec.CommandContext(ctx, cliPath, "topology", "--url", metricsURL(""), "--insecure-skip-tls-verify").CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("401 Unauthorized: the manager answers only to a bearer token"))

		b, err = exec.CommandContext(ctx, cliPath, "topology", "--url", metricsURL(""), "--token", nobodyToken,
			"--insecure-skip-tls-verify").CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("bind it to the ClusterRole flagplane-metrics-reader"))
	})

	It("has `flagplane explain --url` ask the manager, which computes the sidecar with the options it injects with; an object not in its graph, or a token without the role, is said plainly", func(ctx SpecContext) {
		b, err := exec.CommandContext(ctx, cliPath, "explain", "deployment/shop-web", "-n", shop, "--url", metricsURL(""), "--token", readerToken,
			"--insecure-skip-tls-verify", "-o", "json").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		var report explain.Report
		Expect(json.Unmarshal(b, &report)).To(Succeed(), "%s", b)
		Expect(report.Object).To(Equal("Deployment " + shop + "/shop-web"))
		Expect(report.Sources).NotTo(BeEmpty())
		Expect(report.Sidecar).NotTo(BeNil())
		Expect(report.Sidecar.Note).To(Equal("computed by the manager with the options it injects with"))
		Expect(report.Sidecar.Image).To(Equal(mgr.Options.Sidecar.ImageReference()), "the manager's own sidecar image")

		b, err = exec.CommandContext(ctx, cliPath, "explain", "deployment/nope", "-n", shop, "--url", metricsURL(""), "--token", readerToken,
			"--insecure-skip-tls-verify").CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("Deployment " + shop + "/nope is not in the graph"))

		b, err = exec.CommandContext(ctx, cliPath, "explain", "deployment/shop-web", "-n", shop, "--url", metricsURL(""), "--token", nobodyToken,
			"--insecure-skip-tls-verify").CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("bind it to the ClusterRole flagplane-metrics-reader"))
	})

	It("has a standby replica that is ready, with its graph built, while not the leader", func() {
		opts := app.DefaultOptions()
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = systemNS
		opts.Registry = prometheus.NewRegistry() // the leader's metrics own the process-wide registry
		opts.WebhookHost, opts.Admission.ExtraDNSNames = "127.0.0.1", []string{"127.0.0.1"}
		opts.WebhookPort = 0 // one it picks
		standby := startManager(impersonating(systemNS, managerSA), "127.0.0.1", opts)
		Eventually(httpStatus("http://" + standby.probeAddr + "/readyz")).Should(Equal(http.StatusOK))
		Expect(standby.Controller.Ready()).To(BeFalse(), "only the leader runs the first reconciliation pass")
		Consistently(standby.Elected(), "2s").ShouldNot(BeClosed())
		Expect(standby.Controller.Topology().Snapshot().Counts()[topology.KindFlagSet]).To(BeNumerically(">", 0))
	})
}

// httpStatus GETs url and returns the status code (0 when it cannot connect).
func httpStatus(url string) func() int {
	return func() int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
}

// answer is a status code and body.
type answer struct {
	Status int
	Body   string
}

// answerTo GETs url with a bearer token (none when empty).
func answerTo(url, token string) answer {
	GinkgoHelper()
	status, body, err := bearerGet(url, token)
	Expect(err).NotTo(HaveOccurred())
	return answer{Status: status, Body: body}
}

// securedGet GETs url with a bearer token and returns the body of a 200 answer.
func securedGet(url, token string) (string, error) {
	status, body, err := bearerGet(url, token)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("%s: %d: %s", url, status, body)
	}
	return body, nil
}
