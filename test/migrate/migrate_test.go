package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/workflows/restarts"
)

const (
	shop   = "shop"
	ofoNS  = "open-feature-operator-system"
	legacy = "open-feature-operator-flagd-kubernetes-sync"
)

// object is a leftover the command must name, and the kind it reports.
type object struct {
	obj  client.Object
	kind string
}

func (o object) key() client.ObjectKey { return client.ObjectKeyFromObject(o.obj) }

func (o object) String() string {
	if o.obj.GetNamespace() == "" {
		return o.kind + " " + o.obj.GetName()
	}
	return o.kind + " " + o.obj.GetNamespace() + "/" + o.obj.GetName()
}

func exists(ctx SpecContext, o object) bool {
	GinkgoHelper()
	err := k8s.Get(ctx, o.key(), o.obj.DeepCopyObject().(client.Object))
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

// managedBy is the app.kubernetes.io/managed-by label of o, "" when o
// does not exist.
func managedBy(ctx SpecContext, o object) string {
	GinkgoHelper()
	obj := o.obj.DeepCopyObject().(client.Object)
	err := k8s.Get(ctx, o.key(), obj)
	if apierrors.IsNotFound(err) {
		return ""
	}
	Expect(err).NotTo(HaveOccurred())
	return obj.GetLabels()[v1beta1.LabelManagedBy]
}

func named(obj client.Object, namespace, name string) client.Object {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

var (
	// Removed at the first --apply: nothing running uses them.
	admissionLeftovers = []object{
		{named(&admissionregistrationv1.MutatingWebhookConfiguration{}, "", "open-feature-operator-mutating-webhook-configuration"), "MutatingWebhookConfiguration"},
		{named(&admissionregistrationv1.ValidatingWebhookConfiguration{}, "", "open-feature-operator-validating-webhook-configuration"), "ValidatingWebhookConfiguration"},
		{named(&rbacv1.ClusterRoleBinding{}, "", "open-feature-operator-manager-rolebinding"), "ClusterRoleBinding"},
		{named(&rbacv1.ClusterRole{}, "", "open-feature-operator-manager-role"), "ClusterRole"},
	}
	// What the OpenFeature Operator's manager made for a Flagd, removed at
	// the first --apply: flagplane makes its own of the same names once
	// these are gone.
	flagdLeftovers = []object{
		{named(&appsv1.Deployment{}, shop, "shop-flagd"), "Deployment"},
		{named(&corev1.Service{}, shop, "shop-flagd"), "Service"},
	}
	// Removed once the pods of the OpenFeature Operator's sidecar are gone.
	inUseLeftovers = []object{
		{named(&rbacv1.ClusterRoleBinding{}, "", legacy), "ClusterRoleBinding"},
		{named(&rbacv1.ClusterRole{}, "", legacy), "ClusterRole"},
		{named(&appsv1.Deployment{}, ofoNS, "flagd-proxy"), "Deployment"},
		{named(&corev1.Service{}, ofoNS, "flagd-proxy-svc"), "Service"},
		{named(&policyv1.PodDisruptionBudget{}, ofoNS, "flagd-proxy-pdb"), "PodDisruptionBudget"},
		{named(&corev1.ServiceAccount{}, ofoNS, "open-feature-operator-flagd-proxy"), "ServiceAccount"},
		{named(&corev1.ConfigMap{}, shop, "shop-flags"), "ConfigMap"},
	}
	legacyPods = []string{"legacy-file", "legacy-kube", "legacy-proxy"}
)

// The story of a platform team: the OpenFeature Operator ran, its namespace
// was deleted rather than uninstalled (or it was installed from manifests),
// flagplane is installed, and `flagplane migrate` cleans up.
var _ = Describe("flagplane migrate", Ordered, func() {
	var ff *v1beta1.FeatureFlag

	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shop}})).To(Succeed())
		_, err := cp.Kubectl("apply", "--field-manager=helm", "-f", filepath.Join("testdata", "ofo-install-leftovers.yaml"))
		Expect(err).NotTo(HaveOccurred())
		// The team's objects, as kubectl apply wrote them.
		_, err = cp.Kubectl("apply", "-n", shop, "-f", filepath.Join("testdata", "shop.yaml"))
		Expect(err).NotTo(HaveOccurred())
		ff = &v1beta1.FeatureFlag{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flags"}, ff)).To(Succeed())
		// What the OpenFeature Operator's injector generated while it ran.
		raw, err := os.ReadFile(filepath.Join("testdata", "ofo-generated.yaml"))
		Expect(err).NotTo(HaveOccurred())
		flagd := &v1beta1.Flagd{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flagd"}, flagd)).To(Succeed())
		generated := strings.NewReplacer("FEATUREFLAG_UID", string(ff.UID), "FLAGD_UID", string(flagd.UID)).Replace(string(raw))
		_, err = cp.KubectlWithInput(strings.NewReader(generated),
			"apply", "--field-manager=manager", "-n", shop, "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		// The OpenFeature Operator's manager restarted the Deployment once
		// (rolloutOnChange): the annotation is its field.
		Eventually(func() error {
			d := &appsv1.Deployment{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "web"}, d); err != nil {
				return err
			}
			d.Spec.Template.Annotations[restarts.RestartedAtAnnotation] = "2025-01-01T00:00:00Z"
			return k8s.Update(ctx, d, client.FieldOwner("manager"))
		}).Should(Succeed())
		// Its validator last: from now on it refuses every FeatureFlag write.
		_, err = cp.Kubectl("apply", "--field-manager=helm", "-f", filepath.Join("testdata", "ofo-validator.yaml"))
		Expect(err).NotTo(HaveOccurred())
	})

	It("shows the leftover validator refusing every FeatureFlag write", func(ctx SpecContext) {
		Eventually(func() error { return setDefault(ctx, ff, "on") }).Should(MatchError(ContainSubstring("vfeatureflag.kb.io")))
	})

	It("finds every leftover and says what it means, without changing anything", func(ctx SpecContext) {
		out, err := migrateCmd()
		Expect(err).NotTo(HaveOccurred())
		for _, o := range append(append([]object{}, admissionLeftovers...), flagdLeftovers...) {
			Expect(out).To(MatchRegexp(`\n  remove\s+%s\n`, regexpQuote(o.String())), "%s", o)
		}
		for _, o := range inUseLeftovers {
			Expect(out).To(MatchRegexp(`\n  in use\s+%s\n`, regexpQuote(o.String())), "%s", o)
		}
		for _, p := range legacyPods {
			Expect(out).To(MatchRegexp(`\n  to do\s+Pod shop/%s\n`, p))
		}
		Expect(oneLine(out)).To(And(
			ContainSubstring("every create and update of a FeatureFlag is refused"),
			ContainSubstring("3 subjects: ServiceAccount open-feature-operator-system/open-feature-operator-controller-manager"),
			ContainSubstring("the OpenFeature Operator's copy of FeatureFlag shop/shop-flags for the file provider"),
			ContainSubstring("used by: shop/legacy-file"),
			ContainSubstring("Taken over as they are: 1 FeatureFlags, 3 FeatureFlagSources, 1 Flagds."),
			ContainSubstring("the Deployment the OpenFeature Operator made for Flagd shop/shop-flagd"),
			ContainSubstring("Run flagplane migrate --apply to remove the 6 marked remove."),
		))
		for _, o := range append(append(append([]object{}, admissionLeftovers...), inUseLeftovers...), flagdLeftovers...) {
			Expect(exists(ctx, o)).To(BeTrue(), "%s: a scan removes nothing", o)
		}
		By("flagplane does not take over the Flagd's objects the OpenFeature Operator made, and says so")
		Eventually(func(g Gomega) {
			flagd := &v1beta1.Flagd{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flagd"}, flagd)).To(Succeed())
			programmed := meta.FindStatusCondition(flagd.Status.Conditions, v1beta1.ConditionProgrammed)
			g.Expect(programmed).NotTo(BeNil())
			g.Expect(programmed.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonApplyFailed))
		}).Should(Succeed())
		Expect(managedBy(ctx, flagdLeftovers[0])).To(Equal("open-feature-operator"))
	})

	It("removes nothing while the OpenFeature Operator's manager is installed", func(ctx SpecContext) {
		manager := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ofoNS, Name: "open-feature-operator-controller-manager"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"control-plane": "controller-manager"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"control-plane": "controller-manager"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "open-feature/open-feature-operator:v0.9.2"}}}}}}
		Expect(k8s.Create(ctx, manager)).To(Succeed())
		out, err := migrateCmd("--apply")
		Expect(err).To(MatchError(ContainSubstring("exit status 1")))
		Expect(out).To(MatchRegexp(`\n  to do\s+Deployment open-feature-operator-system/open-feature-operator-controller-manager\n`))
		Expect(oneLine(out)).To(And(
			ContainSubstring("uninstall it: helm uninstall <release> -n open-feature-operator-system"),
			ContainSubstring("the OpenFeature Operator's manager is still installed: uninstall it first")))
		for _, o := range admissionLeftovers {
			Expect(exists(ctx, o)).To(BeTrue(), "%s", o)
		}
		Expect(k8s.Delete(ctx, manager)).To(Succeed())
	})

	It("counts no Flagd's object as a leftover when flagplane's manager labels what it generates open-feature-operator", func(ctx SpecContext) {
		// A flagplane with --managed-by=open-feature-operator takes over the
		// Flagd's objects in place: removing them would only interrupt it.
		noFlagdLeftovers := func(out string) {
			GinkgoHelper()
			for _, o := range flagdLeftovers {
				Expect(out).NotTo(MatchRegexp(`\n  remove\s+%s\n`, regexpQuote(o.String())), "%s is flagplane's", o)
			}
			for _, o := range admissionLeftovers {
				Expect(out).To(MatchRegexp(`\n  remove\s+%s\n`, regexpQuote(o.String())), "%s is still a leftover", o)
			}
			Expect(oneLine(out)).To(And(
				ContainSubstring("flagplane labels what it generates app.kubernetes.io/managed-by=open-feature-operator"),
				ContainSubstring("Run flagplane migrate --apply to remove the 4 marked remove.")))
		}
		By("given with --managed-by")
		out, err := migrateCmd("--managed-by=open-feature-operator")
		Expect(err).NotTo(HaveOccurred())
		noFlagdLeftovers(out)

		By("read from the manager's Deployment")
		manager := func(ns string, args ...string) *appsv1.Deployment {
			labels := map[string]string{"app.kubernetes.io/name": "flagplane"}
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagplane-manager"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "flagplane", Args: args}}}}}}
		}
		installed := manager(operator.Namespace, "--leader-elect", "--managed-by=open-feature-operator")
		Expect(k8s.Create(ctx, installed)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, installed))).To(Succeed()) })
		out, err = migrateCmd()
		Expect(err).NotTo(HaveOccurred())
		noFlagdLeftovers(out)

		By("managers that disagree: refused rather than guessed")
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}})).To(Succeed())
		other := manager("team-b", "--leader-elect")
		Expect(k8s.Create(ctx, other)).To(Succeed())
		out, err = migrateCmd("--apply")
		Expect(err).To(HaveOccurred())
		Expect(oneLine(out)).To(ContainSubstring("app.kubernetes.io/managed-by=flagplane in team-b; open-feature-operator in " + operator.Namespace +
			"): say which value is this install's with --managed-by"))
		Expect(k8s.Delete(ctx, other)).To(Succeed())
		Expect(k8s.Delete(ctx, installed)).To(Succeed())
		for _, o := range flagdLeftovers {
			Expect(exists(ctx, o)).To(BeTrue(), "%s: nothing removed", o)
		}
	})

	It("--apply removes what nothing uses any more, and keeps what the OpenFeature Operator's pods still use", func(ctx SpecContext) {
		out, err := migrateCmd("--apply")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("\nRemoved:\n"))
		for _, o := range admissionLeftovers {
			Expect(exists(ctx, o)).To(BeFalse(), "%s removed", o)
			Expect(out).To(ContainSubstring("\n  " + o.String() + "\n"))
		}
		for _, o := range inUseLeftovers {
			Expect(exists(ctx, o)).To(BeTrue(), "%s still used by a running pod", o)
		}
		By("the Flagd's objects are flagplane's now, and the Flagd is Programmed")
		for _, o := range flagdLeftovers {
			Expect(out).To(ContainSubstring("\n  " + o.String() + "\n"))
			Eventually(func() string { return managedBy(ctx, o) }).Should(Equal("flagplane"), "%s made again by flagplane", o)
		}
		Eventually(func(g Gomega) {
			flagd := &v1beta1.Flagd{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flagd"}, flagd)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(flagd.Status.Conditions, v1beta1.ConditionProgrammed)).To(BeTrue())
		}).Should(Succeed())
		By("FeatureFlags can be written again: flagplane's validator alone answers")
		Eventually(func() error { return setDefault(ctx, ff, "on") }).Should(Succeed())
	})

	It("--apply removes the rest once the workloads are rolled; a second run finds nothing", func(ctx SpecContext) {
		for _, p := range legacyPods {
			Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: p}}, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(func() int {
			var pods corev1.PodList
			Expect(k8s.List(ctx, &pods, client.InNamespace(shop))).To(Succeed())
			n := 0
			for _, p := range pods.Items {
				if strings.HasPrefix(p.Name, "legacy-") {
					n++
				}
			}
			return n
		}).Should(BeZero())
		out, err := migrateCmd("--apply")
		Expect(err).NotTo(HaveOccurred())
		for _, o := range inUseLeftovers {
			Expect(exists(ctx, o)).To(BeFalse(), "%s removed", o)
		}
		Expect(out).To(ContainSubstring("Now:\nNothing of the OpenFeature Operator is left."))

		out, err = migrateCmd()
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("Nothing of the OpenFeature Operator is left.\n"))
		Expect(out).NotTo(ContainSubstring("--apply"))
	})

	It("takes over the FeatureFlags, sources and Deployments without field-manager conflicts", func(ctx SpecContext) {
		By("status written over the OpenFeature Operator's and kubectl's managed fields")
		for _, obj := range []client.Object{
			&v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "shop-flags"}},
			&v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "file-source"}},
			&v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "kube-source"}},
			&v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "proxy-source"}},
		} {
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
				var conds []metav1.Condition
				switch o := obj.(type) {
				case *v1beta1.FeatureFlag:
					conds = o.Status.Conditions
				case *v1beta1.FeatureFlagSource:
					conds = o.Status.Conditions
				}
				g.Expect(meta.IsStatusConditionTrue(conds, v1beta1.ConditionAccepted)).To(BeTrue(), "%+v", conds)
				g.Expect(managersOf(obj)).To(ContainElement("kubectl-client-side-apply"), "the team's fields are still the team's")
			}).Should(Succeed(), "%T %s", obj, obj.GetName())
		}

		By("a rollout over the restart annotation the OpenFeature Operator's manager owns")
		web := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "web"}, web)).To(Succeed())
		Expect(managersOf(web)).To(ContainElement("manager"))
		Eventually(func() error {
			src := &v1beta1.FeatureFlagSource{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "proxy-source"}, src); err != nil {
				return err
			}
			src.Spec.DebugLogging = ptr.To(true)
			return k8s.Update(ctx, src)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "web"}, web)).To(Succeed())
			g.Expect(web.Spec.Template.Annotations).To(HaveKeyWithValue(restarts.RestartedAtAnnotation, Not(Equal("2025-01-01T00:00:00Z"))))
		}).Should(Succeed())

		By("the new pods get flagplane's sidecar, syncing from its sync server")
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(shop), client.MatchingLabels{"app": "web"})).To(Succeed())
			g.Expect(pods.Items).To(ContainElement(And(
				HaveField("ObjectMeta.Annotations", HaveKey(restarts.AnnotationInjection)),
				HaveField("Spec.InitContainers", ContainElement(HaveField("Args", ContainElement(ContainSubstring(`"selector":"core.openfeature.dev/shop/shop-flags"`))))),
			)))
		}, time.Minute).Should(Succeed())
	})

	It("takes over CRDs whose fields Helm owns, with --force-conflicts", func(ctx SpecContext) {
		By("the CRD as a Helm-installed OpenFeature Operator left it: Helm owns fields flagplane's manifest sets")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "featureflags.core.openfeature.dev"}, crd)).To(Succeed())
		crd.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		crd.Annotations = map[string]string{"meta.helm.sh/release-name": "open-feature-operator"}
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "FeatureFlag is the Schema for the featureflags API"
		Expect(k8s.Update(ctx, crd, client.FieldOwner("helm"))).To(Succeed())

		_, err := cp.Kubectl("apply", "--server-side", "-k", filepath.Join(root, "config", "crd"))
		Expect(err).To(MatchError(ContainSubstring("conflict")), "without --force-conflicts, kubectl stops at Helm's fields")
		_, err = cp.Kubectl("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(root, "config", "crd"))
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "featureflags.core.openfeature.dev"}, crd)).To(Succeed())
		Expect(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description).To(Equal("FeatureFlag is a flag set in flagd's format."))

		out, err := migrateCmd()
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("Nothing of the OpenFeature Operator is left.\n"))
	})
})

// setDefault sets the defaultVariant of the flag set's flag.
func setDefault(ctx SpecContext, ff *v1beta1.FeatureFlag, variant string) error {
	cur := &v1beta1.FeatureFlag{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), cur); err != nil {
		return err
	}
	f := cur.Spec.FlagSpec.Flags["new-checkout"]
	f.DefaultVariant = variant
	cur.Spec.FlagSpec.Flags["new-checkout"] = f
	return k8s.Update(ctx, cur)
}

// oneLine is the command's output with every run of space (its wrapping) made one space.
func oneLine(out string) string { return strings.Join(strings.Fields(out), " ") }

func managersOf(obj client.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		out = append(out, e.Manager)
	}
	return out
}

func regexpQuote(s string) string {
	r := strings.NewReplacer(".", `\.`, "/", `/`, "(", `\(`, ")", `\)`)
	return r.Replace(s)
}
