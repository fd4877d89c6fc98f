package install

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// describeHelm replaces the kustomize install with `helm install` of
// charts/flagplane, as a user of the OpenFeature Operator's chart would run
// it (no --namespace: the chart installs into flagplane-system, which it
// creates), holds it to config/default's RBAC matrix, runs its manager,
// upgrades it, rolls its replicas and uninstalls it.
func describeHelm() {
	chart := func() string { return filepath.Join(rootDir, "charts", "flagplane") }
	manager := serviceAccount(systemNS, managerSA)
	var (
		mgr      *installedManager
		shop     string
		services map[string]*admissionregistrationv1.ServiceReference
	)

	BeforeAll(func(ctx SpecContext) {
		By("uninstalling the kustomize install (the CRDs with it)")
		kubectl("delete", "--ignore-not-found", "--wait=false", "-k", combinationDir(clusterWide, fullest))
		Eventually(func() bool {
			err := k8s.Get(ctx, client.ObjectKey{Name: systemNS}, &corev1.Namespace{})
			return apierrors.IsNotFound(err)
		}, "2m").Should(BeTrue(), "namespace %s finalized", systemNS)
		Eventually(func() (string, error) {
			return cp.Kubectl("get", "crd", "-l", "app.kubernetes.io/part-of=flagplane", "-o", "name")
		}, "2m").Should(BeEmpty(), "the CRDs deleted")

		helm("install", "flagplane", chart())
		waitForPolicy(ctx)
		services = webhookServices(ctx, "flagplane-injector", "flagplane-validator")
		// Started here, so that it runs until the last spec (a DeferCleanup
		// in an It would stop it after that It).
		mgr = runInstalled(ctx, systemNS, nil)
		pointWebhooksAt(ctx, mgr.webhookBase, "flagplane-injector", "flagplane-validator")
		shop = newNamespace(ctx, "helm-shop")
	})

	It("installs what config/default installs, and only that", func() {
		manifest := objects(helm("get", "manifest", "flagplane"))
		fromKustomize := objects(kustomizeBuild(filepath.Join(rootDir, "config", "default")))
		Expect(slices.Sorted(maps.Keys(manifest))).To(Equal(slices.Sorted(maps.Keys(fromKustomize))))
		for key, obj := range manifest {
			md := obj["metadata"].(map[string]any)
			Expect(md["labels"]).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), key)
			resource := strings.ToLower(obj["kind"].(string))
			if group := groupOf(obj); group != "" {
				resource += "." + group
			}
			args := []string{"get", resource, md["name"].(string), "-o", "name"}
			if ns, ok := md["namespace"].(string); ok {
				args = append(args, "-n", ns)
			}
			Expect(kubectl(args...)).NotTo(BeEmpty(), key)
		}
	})

	DescribeTable("the manager's ServiceAccount",
		func(want bool, args ...string) {
			Expect(canI(manager, args...)).To(Equal(want), "kubectl auth can-i %s", strings.Join(args, " "))
		},
		managerMatrix(),
	)

	It("runs its manager: ready, elected, its caBundle kept, the samples reconciled, flagd injected", func(ctx SpecContext) {
		expectServing(ctx, mgr, "flagplane-validator", shop)
	})

	It("upgrades in place: every object kept, the caBundle too, and injection goes on", func(ctx SpecContext) {
		before := objects(helm("get", "manifest", "flagplane"))
		// The webhooks back at their Service, as installed: helm's patch
		// would otherwise leave both a url (the suite's) and a service.
		restoreWebhookServices(ctx, services)
		helm("upgrade", "flagplane", chart(), "--set", "controllerManager.replicas=3,sidecarConfiguration.debugLogging=true")
		pointWebhooksAt(ctx, mgr.webhookBase, "flagplane-injector", "flagplane-validator")
		after := objects(helm("get", "manifest", "flagplane"))
		Expect(slices.Sorted(maps.Keys(after))).To(Equal(slices.Sorted(maps.Keys(before))))
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-manager"}, d)).To(Succeed())
		Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(3))))
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--sidecar-debug-logging=true"))
		for _, name := range []string{"flagplane-injector"} {
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, m)).To(Succeed())
			Expect(m.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "helm upgrade leaves the manager's caBundle alone")
		}
		web := fixtures.Deployment(shop, "after-upgrade", nil, nil)
		Expect(k8s.Create(ctx, fixtures.Source(shop, "after-upgrade", []v1beta1.Source{fixtures.FileRef("shop-flags")},
			fixtures.Targeting("Deployment", "after-upgrade")))).To(Succeed())
		Eventually(func() bool {
			_, ok := mgr.Controller.Topology().Snapshot().Source(topology.SourceKey(shop, "after-upgrade"))
			return ok
		}).Should(BeTrue())
		Expect(k8s.Create(ctx, web)).To(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(shop), client.MatchingLabels(web.Spec.Selector.MatchLabels))).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			g.Expect(pods.Items[0].Spec.InitContainers).To(ContainElement(HaveField("Name", injection.SidecarName)))
		}).Should(Succeed())
	})

	It("uninstalls, keeping the CRDs and so every flag set", func(ctx SpecContext) {
		// As its Pods would be, before its namespace goes.
		Expect(mgr.Stop()).To(Succeed())
		helm("uninstall", "flagplane")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "flagplane-manager"}, &appsv1.Deployment{}))
		}).Should(BeTrue())
		Expect(kubectl("get", "crd", "featureflags.core.openfeature.dev", "-o", "name")).NotTo(BeEmpty(), "helm.sh/resource-policy: keep")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: shop, Name: "shop-flags"}, &v1beta1.FeatureFlag{})).To(Succeed())
	})
}

// groupOf is the API group of obj ("" for the core group), for kubectl.
func groupOf(obj map[string]any) string {
	group, _, ok := strings.Cut(obj["apiVersion"].(string), "/")
	if !ok {
		return ""
	}
	return group
}

// webhookServices are the Service references of the webhooks of the named
// configurations, by configuration and webhook name.
func webhookServices(ctx context.Context, mutating, validating string) map[string]*admissionregistrationv1.ServiceReference {
	GinkgoHelper()
	out := map[string]*admissionregistrationv1.ServiceReference{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: mutating}, m)).To(Succeed())
	for _, w := range m.Webhooks {
		Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
		out["mutating/"+mutating+"/"+w.Name] = w.ClientConfig.Service.DeepCopy()
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: validating}, v)).To(Succeed())
	for _, w := range v.Webhooks {
		Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
		out["validating/"+validating+"/"+w.Name] = w.ClientConfig.Service.DeepCopy()
	}
	return out
}

// restoreWebhookServices points the webhooks of webhookServices back at
// their Services, keeping their caBundle.
func restoreWebhookServices(ctx context.Context, services map[string]*admissionregistrationv1.ServiceReference) {
	GinkgoHelper()
	for key, svc := range services {
		kind, rest, _ := strings.Cut(key, "/")
		name, webhook, _ := strings.Cut(rest, "/")
		Eventually(func(g Gomega) {
			var obj client.Object
			var configs []*admissionregistrationv1.WebhookClientConfig
			if kind == "mutating" {
				m := &admissionregistrationv1.MutatingWebhookConfiguration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, m)).To(Succeed())
				for i := range m.Webhooks {
					if m.Webhooks[i].Name == webhook {
						configs = append(configs, &m.Webhooks[i].ClientConfig)
					}
				}
				obj = m
			} else {
				v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, v)).To(Succeed())
				for i := range v.Webhooks {
					if v.Webhooks[i].Name == webhook {
						configs = append(configs, &v.Webhooks[i].ClientConfig)
					}
				}
				obj = v
			}
			g.Expect(configs).To(HaveLen(1), key)
			configs[0].URL, configs[0].Service = nil, svc.DeepCopy()
			g.Expect(k8s.Update(ctx, obj)).To(Succeed())
		}).Should(Succeed())
	}
}
