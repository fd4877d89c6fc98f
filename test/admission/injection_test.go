package admission

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/webhooks/certs"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

var _ = Describe("Pod injection", func() {
	It("gives the Pods the ReplicaSet controller creates for a Deployment targeted by targetRefs the sidecar, its volume and the env", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web")))
		started := time.Now()
		create(ctx, deployment(ns, "web", nil, nil))
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(HaveSidecar()))
		AddReportEntry("Deployment created → injected Pod stored", time.Since(started).Round(time.Millisecond).String())

		pod := pods(ctx, ns, "web")()[0]
		Expect(pod).To(mountsFlagSet(ns, "checkout"))
		Expect(pod).To(appEnv("FLAGD_RESOLVER", "rpc"))
		Expect(pod).To(appEnv("FLAGD_PORT", "8013"))
		Expect(pod.Annotations).To(HaveKeyWithValue(restarts.AnnotationInjection, Not(BeEmpty())))
		fd := sidecar(pod)
		Expect(fd.Args[:2]).To(Equal([]string{"start", "--management-port"}))
		Expect(arg(fd, "--sources")).To(MatchJSON(`[{"uri":"/etc/flagd/` + ns + `_checkout/` + ns + `_checkout.flagd.json","provider":"file"}]`))
		Expect(fd.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(fd.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(fd.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(configMap(ctx, ns, ns, "checkout")()).To(Succeed(), "the ConfigMap a Pod mounts exists")
	})

	It("injects the Pods of a Deployment that opts in by annotation", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}))
		create(ctx, deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "flags",
		}))
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
	})

	It("injects the Pods of a Deployment selected by label", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")},
			func(s *v1beta1.FeatureFlagSource) {
				s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"flags": "yes"}}
			}))
		create(ctx, deployment(ns, "web", map[string]string{"flags": "yes"}, nil), deployment(ns, "other", nil, nil))
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(HaveSidecar()))
		Eventually(pods(ctx, ns, "other")).ShouldNot(BeEmpty())
		Expect(pods(ctx, ns, "other")()).To(HaveEach(Not(HaveSidecar())), "a Deployment the selector does not match")
		Expect(pods(ctx, ns, "other")()[0].Annotations).NotTo(HaveKey(restarts.AnnotationInjection))
	})

	It("injects the Pods of a StatefulSet", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("StatefulSet", "db")))
		create(ctx, statefulSet(ns, "db"))
		Eventually(pods(ctx, ns, "db")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"), HaveField("Name", "db-0"))))
	})

	It("injects a Pod of a DaemonSet (created here: without nodes the DaemonSet controller creates none)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ds := daemonSet(ns, "agent")
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("DaemonSet", "agent")), ds)
		pod := podOf(ds)
		create(ctx, pod)
		Expect(*pod).To(And(HaveSidecar(), mountsFlagSet(ns, "checkout"), appEnv("FLAGD_RESOLVER", "rpc")))
	})

	It("merges several sources of one workload: every flag set once, the later source's settings", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), flagSet(ns, "search"),
			source(ns, "a-flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web"),
				func(s *v1beta1.FeatureFlagSource) { s.Spec.Port = 9000 }),
			source(ns, "b-flags", []v1beta1.Source{file("checkout"), file("search"), {Source: "checkout", Provider: v1beta1.SyncProviderFlagdProxy}},
				targeting("Deployment", "web"), func(s *v1beta1.FeatureFlagSource) {
					s.Spec.Port = 9100
					s.Spec.EnvVars = []corev1.EnvVar{{Name: "TEAM", Value: "shop"}}
				}))
		create(ctx, deployment(ns, "web", nil, nil))
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(HaveSidecar()))
		pod := pods(ctx, ns, "web")()[0]
		Expect(pod).To(And(mountsFlagSet(ns, "checkout"), mountsFlagSet(ns, "search"), appEnv("FLAGD_PORT", "9100"), appEnv("FLAGD_TEAM", "shop")))
		Expect(pod.Spec.Volumes).To(HaveLen(2 + 1)) // two flag sets, and the service account token
		var entries []injection.FlagdSourceConfig
		Expect(json.Unmarshal([]byte(arg(sidecar(pod), "--sources")), &entries)).To(Succeed())
		Expect(entries).To(HaveLen(3))
		Expect(entries[2]).To(Equal(injection.FlagdSourceConfig{URI: "flagplane-sync.flagplane-system.svc:8015", Provider: "grpc",
			Selector: "core.openfeature.dev/" + ns + "/checkout"}))
	})

	It("gives the Pods of an in-process configuration env vars and no sidecar", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inproc"},
			Spec: v1beta1.InProcessConfigurationSpec{Host: "flagplane-sync.flagplane-system.svc", Selector: "core.openfeature.dev/" + ns + "/checkout"}}
		create(ctx, ipc, deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "inproc",
		}))
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(appEnv("FLAGD_RESOLVER", "in-process")))
		pod := pods(ctx, ns, "web")()[0]
		Expect(pod).NotTo(HaveSidecar())
		Expect(pod).To(And(appEnv("FLAGD_HOST", "flagplane-sync.flagplane-system.svc"), appEnv("FLAGD_PORT", "8015"),
			appEnv("FLAGD_SOURCE_SELECTOR", "core.openfeature.dev/"+ns+"/checkout")))
	})

	It("answers a dry-run create with the injection and writes nothing", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ds := daemonSet(ns, "agent")
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("DaemonSet", "agent")), ds)
		Eventually(configMap(ctx, ns, ns, "checkout")).Should(Succeed())
		before := operator.configMaps.calls(ns)

		pod := podOf(ds)
		pod.Name = "dry"
		Expect(k8s.Create(ctx, pod, client.DryRunAll)).To(Succeed())
		Expect(*pod).To(And(HaveSidecar(), mountsFlagSet(ns, "checkout")), "the dry-run answer shows what a create would get")
		Expect(operator.configMaps.calls(ns)).To(Equal(before), "no ConfigMap ensured on dry run")
		err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Pod stored: %v", err)

		By("the same create for real makes sure of the ConfigMap")
		real := podOf(ds)
		create(ctx, real)
		Expect(operator.configMaps.calls(ns)).To(Equal(before + 1))
	})

	It("never mutates a Pod on UPDATE", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ds := daemonSet(ns, "agent")
		create(ctx, flagSet(ns, "checkout"), ds)
		pod := podOf(ds)
		create(ctx, pod)
		Expect(*pod).NotTo(HaveSidecar(), "no source applies yet")

		create(ctx, source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("DaemonSet", "agent")))
		Eventually(func() bool {
			probe := podOf(ds)
			Expect(k8s.Create(ctx, probe, client.DryRunAll)).To(Succeed())
			return sidecar(*probe) != nil
		}).Should(BeTrue(), "the webhook injects the DaemonSet's new Pods now")

		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			pod.Labels["touched"] = "yes"
			pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600) // one of the few mutable spec fields
			return k8s.Update(ctx, pod)
		}).Should(Succeed())
		Expect(*pod).NotTo(HaveSidecar())
		Expect(pod.Annotations).NotTo(HaveKey(restarts.AnnotationInjection))
		Expect(pod.Spec.Containers[0].Env).To(BeEmpty())
	})

	It("serves the webhooks with its own certificate, whose CA bundle it injected", func(ctx SpecContext) {
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "flagplane-webhook-cert"}, secret)).To(Succeed())
		Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
		bundle := secret.Data[certs.KeyCACert]
		Expect(bundle).NotTo(BeEmpty())
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-injector"}, mutating)).To(Succeed())
		Expect(mutating.Webhooks).To(HaveEach(HaveField("ClientConfig.CABundle", Equal(bundle))))
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-validator"}, validating)).To(Succeed())
		Expect(validating.Webhooks).To(HaveEach(HaveField("ClientConfig.CABundle", Equal(bundle))))
		Expect(cp.Env.WebhookInstallOptions.LocalServingCAData).NotTo(Equal(bundle), "not envtest's CA")
	})
})
