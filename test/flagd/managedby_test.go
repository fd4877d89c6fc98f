package flagd

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// --managed-by=open-feature-operator: a control plane of its own, whose
// manager is upgraded from flagplane's default value to the OpenFeature
// Operator's. No node: what is asserted is the objects and whose they are.
var _ = Describe("a manager with --managed-by=open-feature-operator", Ordered, func() {
	const ofo = "open-feature-operator"
	var (
		cp2 *controlplane.ControlPlane
		c2  client.Client
		op2 *operator.Operator
		ns  string
		// before: the UIDs of the objects the default manager made.
		before = map[string]types.UID{}
		// legacyUID: the OpenFeature Operator's Deployment of Flagd legacy.
		legacyUID types.UID
	)
	start := func(ctx SpecContext, managedBy string) {
		GinkgoHelper()
		var err error
		op2, err = operator.Start(ctx, cp2, operator.Options{Dir: GinkgoT().TempDir(), Configure: func(o *app.Options) {
			o.Registry = prometheus.NewRegistry() // the suite's operator has the default one
			if managedBy != "" {
				o.Generated.ManagedBy = managedBy
			}
		}})
		Expect(err).NotTo(HaveOccurred())
	}
	// generated are what flagplane makes for the Flagd "flagd" (with an
	// Ingress, and a kubernetes entry for its RBAC) and for the Deployment
	// "web" the source targets, by kind and name.
	generated := func() map[string]client.Object {
		cm := topology.ConfigMapName(topology.FlagSetKey(ns, "flags"))
		flagdRBAC, webRBAC := rbac.Name(topology.FlagdKey(ns, "flagd")), rbac.Name(topology.WorkloadKey(topology.KindDeployment, ns, "web"))
		return map[string]client.Object{
			"Deployment " + "flagd":    &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}},
			"Service flagd":            &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}},
			"Ingress flagd":            &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}},
			"ConfigMap " + cm:          &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm}},
			"Role " + flagdRBAC:        &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: flagdRBAC}},
			"RoleBinding " + flagdRBAC: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: flagdRBAC}},
			"Role " + webRBAC:          &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webRBAC}},
			"RoleBinding " + webRBAC:   &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: webRBAC}},
		}
	}
	// labelledBy waits until every generated object carries value.
	labelledBy := func(ctx SpecContext, value string) {
		GinkgoHelper()
		for what, o := range generated() {
			Eventually(func() (map[string]string, error) {
				err := c2.Get(ctx, client.ObjectKeyFromObject(o), o)
				return o.GetLabels(), err
			}).Should(HaveKeyWithValue(v1beta1.LabelManagedBy, value), what)
		}
	}
	flagd := func(ctx SpecContext, name string) func() (*v1beta1.Flagd, error) {
		return func() (*v1beta1.Flagd, error) {
			f := &v1beta1.Flagd{}
			return f, c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, f)
		}
	}

	BeforeAll(func(ctx SpecContext) {
		var err error
		cp2, err = controlplane.Start(ctx, controlplane.Options{RootDir: root, Log: GinkgoWriter,
			WebhookInstallOptions: operator.WebhookInstallOptions(root)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(cp2.Stop()).To(Succeed()) })
		c2 = cp2.Client
		ns, err = cp2.NewNamespace(ctx, "managed-by")
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(5*time.Minute))

	It("with flagplane's default, labels what it generates flagplane and leaves the OpenFeature Operator's Deployment alone", func(ctx SpecContext) {
		start(ctx, "")
		web := fixtures.Deployment(ns, "web", nil, nil)
		src := source(ns, "src", fixtures.FileRef("flags"), v1beta1.Source{Source: "flags", Provider: v1beta1.SyncProviderKubernetes})
		src.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web"}}
		// "legacy" names a source that does not exist yet: nothing is
		// generated for it until it does.
		legacy := newFlagd(ns, "legacy", "later")
		for _, o := range []client.Object{flagSet(ns, "flags", "on"), src, web, legacy,
			newFlagd(ns, "flagd", "src", func(f *v1beta1.Flagd) { f.Spec.Ingress.Enabled = true })} {
			Expect(c2.Create(ctx, o)).To(Succeed())
		}
		labelledBy(ctx, "flagplane")
		for what, o := range generated() {
			Expect(c2.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			before[what] = o.GetUID()
		}

		By("the Deployment the OpenFeature Operator made for Flagd legacy: its label, controlled by the Flagd")
		made := ofoDeployment(legacy)
		Expect(c2.Create(ctx, made)).To(Succeed())
		legacyUID = made.UID
		update2(ctx, c2, legacy, func(f *v1beta1.Flagd) { f.Spec.FeatureFlagSource = "src" })
		Eventually(flagd(ctx, "legacy")).Should(haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionFalse, v1beta1.ReasonApplyFailed))
		d := &appsv1.Deployment{}
		Expect(c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, d)).To(Succeed())
		Expect(d.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo), "not taken over")
		Expect(op2.Stop()).To(Succeed())
	})

	It("restarted with open-feature-operator, relabels what it made, in place, and takes over the OpenFeature Operator's", func(ctx SpecContext) {
		start(ctx, ofo)
		DeferCleanup(func() { Expect(op2.Stop()).To(Succeed()) })
		labelledBy(ctx, ofo)
		for what, o := range generated() {
			Expect(c2.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
			Expect(o.GetUID()).To(Equal(before[what]), "%s: the same object, relabelled", what)
		}
		d := &appsv1.Deployment{}
		Expect(c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, d)).To(Succeed())
		Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo), "its pods too")

		By("the OpenFeature Operator's Deployment of Flagd legacy: taken over in place")
		Eventually(flagd(ctx, "legacy")).Should(haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionTrue))
		legacy := &appsv1.Deployment{}
		Expect(c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, legacy)).To(Succeed())
		Expect(legacy.UID).To(Equal(legacyUID))
		Expect(legacy.Spec.Template.Spec.Containers[0].Image).NotTo(Equal("ofo/flagd:old"), "flagplane's flagd now")
		Expect(legacy.ManagedFields).To(ContainElement(HaveField("Manager", v1beta1.FieldManager)))
		Expect(legacy.Spec.Template.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo))

		By("a new workload's ConfigMap and RBAC get the value")
		other := source(ns, "other", v1beta1.Source{Source: "flags", Provider: v1beta1.SyncProviderKubernetes})
		other.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "api"}}
		Expect(c2.Create(ctx, other)).To(Succeed())
		Expect(c2.Create(ctx, fixtures.Deployment(ns, "api", nil, nil))).To(Succeed())
		apiRBAC := rbac.Name(topology.WorkloadKey(topology.KindDeployment, ns, "api"))
		for _, o := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
			Eventually(func() (map[string]string, error) {
				err := c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: apiRBAC}, o)
				return o.GetLabels(), err
			}).Should(HaveKeyWithValue(v1beta1.LabelManagedBy, ofo), "%T", o)
		}

		By("a ConfigMap of another tool under a generated name is not taken over")
		squatted := topology.ConfigMapName(topology.FlagSetKey(ns, "squatted"))
		Expect(c2.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: squatted,
			Labels: map[string]string{v1beta1.LabelManagedBy: "Helm"}}, Data: map[string]string{"mine": "yes"}})).To(Succeed())
		Expect(c2.Create(ctx, flagSet(ns, "squatted", "on"))).To(Succeed())
		update2(ctx, c2, other, func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Sources = append(s.Spec.Sources, fixtures.FileRef("squatted"))
		})
		Eventually(func() (string, error) {
			s := &v1beta1.FeatureFlagSource{}
			err := c2.Get(ctx, client.ObjectKeyFromObject(other), s)
			if c := meta.FindStatusCondition(s.Status.Conditions, v1beta1.ConditionProgrammed); c != nil {
				return c.Message, err
			}
			return "", err
		}).Should(ContainSubstring("not managed by flagplane (no label app.kubernetes.io/managed-by=open-feature-operator or flagplane)"))
		Consistently(func() (map[string]string, error) {
			cm := &corev1.ConfigMap{}
			err := c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: squatted}, cm)
			return cm.Data, err
		}, "2s").Should(Equal(map[string]string{"mine": "yes"}))

		By("what a Flagd no longer asks for goes, under the new value")
		update2(ctx, c2, &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}}, func(f *v1beta1.Flagd) { f.Spec.Ingress.Enabled = false })
		Eventually(func() bool {
			return apierrors.IsNotFound(c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, &networkingv1.Ingress{}))
		}).Should(BeTrue())
	})
})

// ofoDeployment is the Deployment the OpenFeature Operator made for Flagd
// f: its selector, its label, controlled by f.
func ofoDeployment(f *v1beta1.Flagd) *appsv1.Deployment {
	labels := map[string]string{flagds.LabelApp: f.Name, v1beta1.LabelManagedBy: "open-feature-operator"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1beta1.GroupVersion.String(), Kind: v1beta1.FlagdKind,
				Name: f.Name, UID: f.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{flagds.LabelApp: f.Name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "flagd", Image: "ofo/flagd:old"}}}},
		},
	}
}

// update2 changes an object of c as it is now, retrying on conflicts.
func update2[T client.Object](ctx SpecContext, c client.Client, obj T, change func(T)) {
	GinkgoHelper()
	Eventually(func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(ctx, obj)
	}).Should(Succeed())
}
