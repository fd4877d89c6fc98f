package flagd

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// One Describe per event of the kind; each spec starts from a Flagd that
// serves (the create spec shows what that means) and asserts what a client
// of its Service gets after the event.
var _ = Describe("a Flagd", func() {
	// serving creates a flag set at "off", a file source of it and a Flagd
	// of the source, and waits until the Flagd serves "off" over its Service.
	serving := func(ctx SpecContext, prefix string, mutate ...func(*v1beta1.Flagd)) (ns string, ff *v1beta1.FeatureFlag, src *v1beta1.FeatureFlagSource, fd *v1beta1.Flagd) {
		GinkgoHelper()
		ns = newNamespace(ctx, prefix)
		ff = flagSet(ns, "flags", "off")
		src = source(ns, "src", fixtures.FileRef("flags"))
		fd = newFlagd(ns, "flagd", "src", mutate...)
		create(ctx, ff, src, fd)
		Eventually(getter(ctx, fd)).Should(beServing())
		Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
		return ns, ff, src, fd
	}

	Describe("create", func() {
		It("generates a Deployment of flagd and a Service that serve the source's flag sets over RPC and OFREP", func(ctx SpecContext) {
			ns, _, _, fd := serving(ctx, "create")
			Eventually(ofrepVariant(ctx, ns, "flagd")).Should(Equal("off"))

			dep, err := deploymentOf(ctx, ns, "flagd")()
			Expect(err).NotTo(HaveOccurred())
			owner := metav1.GetControllerOf(dep)
			Expect(owner).NotTo(BeNil())
			Expect(owner.Kind).To(Equal("Flagd"))
			Expect(owner.UID).To(Equal(fd.UID))
			Expect(dep.Labels).To(HaveKeyWithValue(v1beta1.LabelManagedBy, v1beta1.ManagedByValue))
			Expect(dep.ManagedFields).To(ContainElement(And(HaveField("Manager", v1beta1.FieldManager), HaveField("Operation", metav1.ManagedFieldsOperationApply))),
				"written with server-side apply by field manager flagplane")
			c := dep.Spec.Template.Spec.Containers[0]
			Expect(c.Image).To(Equal(injection.DefaultSidecarImage + ":" + injection.DefaultSidecarTag))
			Expect(c.Ports).To(HaveLen(4))
			Expect(dep.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", topology.ConfigMapName(topology.FlagSetKey(ns, "flags")))),
				"the file entry's generated ConfigMap")

			By("the status: ready replicas and the endpoints it serves")
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fd), fd)).To(Succeed())
			Expect(fd.Status.ReadyReplicas).To(Equal(int32(1)))
			Expect(fd.Status.Endpoints).To(ContainElement(v1beta1.FlagdEndpoint{API: "flagd", Kind: "Service", Host: "flagd." + ns + ".svc", Port: 8013}))
			Expect(fd.Status.Endpoints).To(ContainElement(v1beta1.FlagdEndpoint{API: "ofrep", Kind: "Service", Host: "flagd." + ns + ".svc", Port: 8016}))
			for _, t := range []string{v1beta1.ConditionAccepted, v1beta1.ConditionResolvedRefs, v1beta1.ConditionProgrammed, v1beta1.ConditionAvailable} {
				Expect(fd).To(haveCondition(t, metav1.ConditionTrue), t)
			}
		})

		It("waits for its FeatureFlagSource, says so, and serves once it exists", func(ctx SpecContext) {
			ns := newNamespace(ctx, "pending")
			ff := flagSet(ns, "flags", "on")
			fd := newFlagd(ns, "flagd", "src")
			create(ctx, ff, fd)
			Eventually(getter(ctx, fd)).Should(And(
				haveCondition(v1beta1.ConditionResolvedRefs, metav1.ConditionFalse, v1beta1.ReasonSourceNotFound),
				haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionFalse, v1beta1.ReasonUnresolvedRefs)))
			Consistently(absent(ctx, &appsv1.Deployment{}, ns, "flagd")).Should(BeTrue(), "nothing is generated for a source that does not exist")

			create(ctx, source(ns, "src", fixtures.FileRef("flags")))
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("on"))
		})
	})

	Describe("source edit", func() {
		It("rolls the Deployment to the source's new settings (OFO #785), and the Service follows flagd's new port", func(ctx SpecContext) {
			ns, _, src, fd := serving(ctx, "source-edit")
			before, err := deploymentOf(ctx, ns, "flagd")()
			Expect(err).NotTo(HaveOccurred())

			update(ctx, src, func(s *v1beta1.FeatureFlagSource) {
				s.Spec.Port = 9013
				s.Spec.EnvVars = append(s.Spec.EnvVars, corev1.EnvVar{Name: "EDITED", Value: "yes"})
			})
			Eventually(deploymentOf(ctx, ns, "flagd")).Should(And(
				HaveField("Generation", BeNumerically(">", before.Generation)),
				HaveField("Spec.Template.Spec.Containers", ContainElement(And(
					HaveField("Args", ContainElements("--port", "9013")),
					HaveField("Env", ContainElement(corev1.EnvVar{Name: "FLAGD_EDITED", Value: "yes"}))))),
			))
			Eventually(func(g Gomega) {
				svc := &corev1.Service{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, svc)).To(Succeed())
				g.Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Name", "flagd"), HaveField("Port", int32(8013)),
					HaveField("TargetPort", intstr.FromInt32(9013)))), "clients keep the Service's port; it targets flagd's")
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				pods, err := flagdPods(ctx, ns, "flagd")()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods).To(ConsistOf(HaveField("Spec.Containers", ContainElement(HaveField("Ports", ContainElement(HaveField("ContainerPort", int32(9013))))))))
			}).Should(Succeed(), "the pod of the old settings is replaced")
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
		})
	})

	Describe("flag-set edit", func() {
		It("reaches the running flagd through its ConfigMap, without a rollout", func(ctx SpecContext) {
			ns, ff, _, _ := serving(ctx, "flag-edit")
			pods, err := flagdPods(ctx, ns, "flagd")()
			Expect(err).NotTo(HaveOccurred())
			Expect(pods).To(HaveLen(1))
			setVariant(ctx, ff, "on")
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("on"))
			Eventually(ofrepVariant(ctx, ns, "flagd")).Should(Equal("on"))
			Consistently(flagdPods(ctx, ns, "flagd")).Should(ConsistOf(HaveField("UID", pods[0].UID)))
		})
	})

	Describe("a generated object deleted", func() {
		It("recreates the Deployment (OFO #785), which serves again", func(ctx SpecContext) {
			ns, _, _, fd := serving(ctx, "child-deleted")
			dep, err := deploymentOf(ctx, ns, "flagd")()
			Expect(err).NotTo(HaveOccurred())
			Expect(k8s.Delete(ctx, dep)).To(Succeed())
			Eventually(deploymentOf(ctx, ns, "flagd")).Should(HaveField("UID", Not(Equal(dep.UID))))
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
		})

		It("recreates the Service", func(ctx SpecContext) {
			ns, _, _, _ := serving(ctx, "svc-deleted")
			svc := &corev1.Service{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, svc)).To(Succeed())
			Expect(k8s.Delete(ctx, svc)).To(Succeed())
			Eventually(func() (types.UID, error) {
				s := &corev1.Service{}
				return s.UID, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, s)
			}).Should(And(Not(BeEmpty()), Not(Equal(svc.UID))))
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
		})
	})

	Describe("a generated object edited by hand", func() {
		It("writes back what flagplane sets and keeps what others add", func(ctx SpecContext) {
			ns, _, _, _ := serving(ctx, "child-edited")
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}}
			update(ctx, dep, func(d *appsv1.Deployment) {
				d.Spec.Replicas = ptr.To[int32](3)
				d.Spec.Template.Spec.Containers[0].Image = "example/not-flagd:1"
				d.Annotations = map[string]string{"example.com/owner": "someone"}
			})
			Eventually(getter(ctx, dep)).Should(And(
				HaveField("Spec.Replicas", HaveValue(Equal(int32(1)))),
				HaveField("Spec.Template.Spec.Containers", ContainElement(HaveField("Image", injection.DefaultSidecarImage+":"+injection.DefaultSidecarTag))),
			))
			Expect(dep.Annotations).To(HaveKeyWithValue("example.com/owner", "someone"), "a field of another manager stays")

			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}}
			update(ctx, svc, func(s *corev1.Service) {
				for i := range s.Spec.Ports {
					s.Spec.Ports[i].TargetPort = intstr.FromInt32(1234)
				}
			})
			Eventually(func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
				g.Expect(svc.Spec.Ports).To(ContainElement(And(HaveField("Name", "flagd"), HaveField("TargetPort", intstr.FromInt32(8013)))))
			}).Should(Succeed())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
		})

		It("never takes over a Service of its name that flagplane does not manage, and creates its own once the name is free", func(ctx SpecContext) {
			ns := newNamespace(ctx, "foreign")
			foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 80}}}}
			fd := newFlagd(ns, "flagd", "src")
			create(ctx, foreign, flagSet(ns, "flags", "on"), source(ns, "src", fixtures.FileRef("flags")), fd)
			Eventually(getter(ctx, fd)).Should(haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionFalse, v1beta1.ReasonApplyFailed))
			Consistently(getter(ctx, foreign)).Should(And(
				HaveField("Spec.Ports", ConsistOf(HaveField("Name", "web"))),
				HaveField("Labels", Not(HaveKey(v1beta1.LabelManagedBy)))))

			Expect(k8s.Delete(ctx, foreign)).To(Succeed())
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("on"))
		})
	})

	Describe("delete", func() {
		It("takes its Deployment, Service, Ingress, ConfigMap and RBAC with it", func(ctx SpecContext) {
			ns := newNamespace(ctx, "delete")
			fd := newFlagd(ns, "flagd", "src", func(f *v1beta1.Flagd) { f.Spec.Ingress.Enabled = true })
			create(ctx, flagSet(ns, "flags", "on"), flagSet(ns, "watched", "on"),
				source(ns, "src", fixtures.FileRef("flags"), v1beta1.Source{Source: "watched", Provider: v1beta1.SyncProviderKubernetes}), fd)
			Eventually(getter(ctx, fd)).Should(beServing())
			rbacName := rbac.Name(topology.FlagdKey(ns, "flagd"))
			cmName := topology.ConfigMapName(topology.FlagSetKey(ns, "flags"))
			for _, o := range []client.Object{&networkingv1.Ingress{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.ConfigMap{}} {
				name := "flagd"
				switch o.(type) {
				case *rbacv1.Role, *rbacv1.RoleBinding:
					name = rbacName
				case *corev1.ConfigMap:
					name = cmName
				}
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)).To(Succeed(), "%T", o)
			}

			Expect(k8s.Delete(ctx, fd)).To(Succeed())
			Eventually(absent(ctx, &appsv1.Deployment{}, ns, "flagd")).Should(BeTrue())
			Eventually(absent(ctx, &corev1.Service{}, ns, "flagd")).Should(BeTrue())
			Eventually(absent(ctx, &networkingv1.Ingress{}, ns, "flagd")).Should(BeTrue())
			Eventually(absent(ctx, &rbacv1.Role{}, ns, rbacName)).Should(BeTrue())
			Eventually(absent(ctx, &rbacv1.RoleBinding{}, ns, rbacName)).Should(BeTrue())
			Eventually(absent(ctx, &corev1.ConfigMap{}, ns, cmName)).Should(BeTrue())
			Eventually(flagdPods(ctx, ns, "flagd")).Should(BeEmpty())
		})
	})

	Describe("delivery modes", func() {
		It("kubernetes: flagd reads the FeatureFlag with its service account, granted by a Role of flagplane's", func(ctx SpecContext) {
			ns := newNamespace(ctx, "kubernetes")
			ff := flagSet(ns, "flags", "off")
			fd := newFlagd(ns, "flagd", "src", func(f *v1beta1.Flagd) { f.Spec.ServiceAccountName = "flagd-reader" })
			create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd-reader"}}, ff,
				source(ns, "src", v1beta1.Source{Source: "flags", Provider: v1beta1.SyncProviderKubernetes}), fd)
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
			binding := &rbacv1.RoleBinding{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbac.Name(topology.FlagdKey(ns, "flagd"))}, binding)).To(Succeed())
			Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "flagd-reader", Namespace: ns}))

			setVariant(ctx, ff, "on")
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("on"))
		})

		It("flagd-proxy: flagd syncs from flagplane's sync server, which pushes an edit", func(ctx SpecContext) {
			ns := newNamespace(ctx, "proxy")
			ff := flagSet(ns, "flags", "off")
			fd := newFlagd(ns, "flagd", "src")
			create(ctx, ff, source(ns, "src", v1beta1.Source{Source: "flags", Provider: v1beta1.SyncProviderFlagdProxy}), fd)
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("off"))
			dep, err := deploymentOf(ctx, ns, "flagd")()
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")).To(ContainSubstring(op.SyncAddress))

			setVariant(ctx, ff, "on")
			Eventually(rpcVariant(ctx, ns, "flagd")).Should(Equal("on"))
		})
	})

	Describe("a source of another namespace", func() {
		It("is followed only when a ReferenceGrant there permits kind Flagd, and its flag set is then copied into the Flagd's namespace", func(ctx SpecContext) {
			shop, app := newNamespace(ctx, "shop"), newNamespace(ctx, "app")
			create(ctx, flagSet(shop, "flags", "on"), source(shop, "src", fixtures.FileRef("flags")))
			fd := newFlagd(app, "flagd", shop+"/src")
			create(ctx, fd)
			Eventually(getter(ctx, fd)).Should(haveCondition(v1beta1.ConditionResolvedRefs, metav1.ConditionFalse, v1beta1.ReasonRefNotPermitted))
			Consistently(absent(ctx, &appsv1.Deployment{}, app, "flagd")).Should(BeTrue())

			By("a grant for pods is not one for Flagds")
			create(ctx, fixtures.PodReferenceGrant(shop, "pods", app, v1beta1.FeatureFlagSourceKind, ""))
			Consistently(getter(ctx, fd)).Should(haveCondition(v1beta1.ConditionResolvedRefs, metav1.ConditionFalse, v1beta1.ReasonRefNotPermitted))

			create(ctx, fixtures.Grant("v1beta1", shop, "flagds",
				[]fixtures.GrantRef{{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FlagdKind, Name: app}},
				[]fixtures.GrantRef{{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind, Name: "src"}}))
			Eventually(getter(ctx, fd)).Should(beServing())
			Eventually(rpcVariant(ctx, app, "flagd")).Should(Equal("on"))
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: app, Name: topology.ConfigMapName(topology.FlagSetKey(shop, "flags"))}, &corev1.ConfigMap{})).To(Succeed())
		})
	})

	Describe("its labels, annotations and Ingress", func() {
		It("puts spec.labels and spec.annotations on every generated object and pod (OFO #775), and removes the Ingress when it is disabled", func(ctx SpecContext) {
			ns, _, _, fd := serving(ctx, "metadata", func(f *v1beta1.Flagd) {
				f.Spec.Labels = map[string]string{"team": "checkout"}
				f.Spec.Annotations = map[string]string{"example.com/scrape": "true"}
				f.Spec.Ingress = v1beta1.IngressSpec{Enabled: true, Hosts: []string{"flags.example"}, Annotations: map[string]string{"example.com/ingress": "a"}}
			})
			for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &networkingv1.Ingress{}} {
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flagd"}, o)).To(Succeed())
				Expect(o.GetLabels()).To(HaveKeyWithValue("team", "checkout"), "%T", o)
				Expect(o.GetAnnotations()).To(HaveKeyWithValue("example.com/scrape", "true"), "%T", o)
			}
			pods, err := flagdPods(ctx, ns, "flagd")()
			Expect(err).NotTo(HaveOccurred())
			Expect(pods).To(HaveEach(And(HaveField("Labels", HaveKeyWithValue("team", "checkout")), HaveField("Annotations", HaveKeyWithValue("example.com/scrape", "true")))))

			By("an annotation of the Ingress removed from the spec")
			update(ctx, fd, func(f *v1beta1.Flagd) { f.Spec.Ingress.Annotations = nil })
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}}
			Eventually(getter(ctx, ing)).Should(HaveField("Annotations", Not(HaveKey("example.com/ingress"))))

			By("the Ingress disabled")
			update(ctx, fd, func(f *v1beta1.Flagd) { f.Spec.Ingress.Enabled = false })
			Eventually(absent(ctx, ing, ns, "flagd")).Should(BeTrue())
			Eventually(getter(ctx, fd)).Should(And(beServing(), HaveField("Status.Endpoints", Not(ContainElement(HaveField("Kind", "Ingress"))))))
		})
	})
})
