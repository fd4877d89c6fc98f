package admission

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// Serial: it stops the operator that the other specs rely on.
var _ = Describe("Healing", Serial, func() {
	It("rolls a targeted Deployment whose Pods were admitted while the webhook was down, with an Event", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web")))

		By("the operator is down: the Pod webhook fails open, Pods come without their sidecar")
		operator.stop()
		web := deployment(ns, "web", nil, nil)
		create(ctx, web)
		Eventually(pods(ctx, ns, "web")).Should(HaveLen(1))
		orphan := pods(ctx, ns, "web")()[0]
		Expect(orphan).NotTo(HaveSidecar())
		Expect(orphan.Annotations).NotTo(HaveKey(restarts.AnnotationInjection))
		Expect(orphan.Annotations).NotTo(HaveKey(restarts.AnnotationAdmitted), "no webhook saw it")

		By("the operator is back: the Deployment is restarted and its new Pod has the sidecar")
		operator = startOperator()
		Eventually(func() string {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(web), web)).To(Succeed())
			return web.Spec.Template.Annotations[restarts.RestartedAtAnnotation]
		}).ShouldNot(BeEmpty())
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
		Eventually(func() []eventsv1.Event {
			var list eventsv1.EventList
			Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			return list.Items
		}).Should(ContainElement(And(
			HaveField("Reason", webhooks.EventInjectionMissing),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Regarding.Name", "web"),
			HaveField("Note", ContainSubstring("pod "+orphan.Name+" runs without its flagd injection and never reached the admission webhook")),
		)))

		By("the old Pod, which the rollout replaces, does not roll the Deployment again")
		restartedAt := web.Spec.Template.Annotations[restarts.RestartedAtAnnotation]
		Consistently(func() string {
			d := &appsv1.Deployment{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(web), d)).To(Succeed())
			return d.Spec.Template.Annotations[restarts.RestartedAtAnnotation]
		}, "5s").Should(Equal(restartedAt))
	})

	It("rolls a Deployment that a new source targets, so that its running Pods get their flags", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, nil)
		create(ctx, flagSet(ns, "checkout"), web)
		Eventually(pods(ctx, ns, "web")).Should(HaveLen(1))
		Expect(pods(ctx, ns, "web")()[0]).NotTo(HaveSidecar())
		Expect(pods(ctx, ns, "web")()[0].Annotations).To(HaveKeyWithValue(restarts.AnnotationAdmitted, restarts.AdmittedNothingToInject),
			"the webhook saw it, with nothing to inject")

		create(ctx, source(ns, "flags", []v1beta1.Source{file("checkout")}, targeting("Deployment", "web")))
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(web), web)).To(Succeed())
		Expect(web.Spec.Template.Annotations).To(HaveKey(restarts.RestartedAtAnnotation))
		Eventually(healEvents(ctx, ns)).Should(ContainElement(And(
			HaveField("Reason", webhooks.EventTargeted),
			// Created before it, or (within the same second) admitted before flagplane knew.
			HaveField("Note", ContainSubstring("the Deployment was targeted by FeatureFlagSource "+ns+"/flags")))))
	})

	It("rolls a Deployment opted in by annotation before its source exists (the OpenFeature Operator's order) as soon as the source is created, saying so", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "flags"})
		create(ctx, flagSet(ns, "checkout"), web)
		Eventually(pods(ctx, ns, "web")).Should(HaveLen(1))
		Expect(pods(ctx, ns, "web")()[0]).NotTo(HaveSidecar())

		create(ctx, source(ns, "flags", []v1beta1.Source{file("checkout")}))
		// Healing follows the Delta of the new source: the suite's resync
		// period is an hour, so nothing else would roll the Deployment.
		Eventually(pods(ctx, ns, "web"), 10*time.Second).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
		Eventually(healEvents(ctx, ns)).Should(ContainElement(And(
			HaveField("Reason", webhooks.EventTargeted),
			// Created before it, or (within the same second) admitted before flagplane knew.
			HaveField("Note", ContainSubstring("the Deployment was targeted by FeatureFlagSource "+ns+"/flags")))))
		Expect(healEvents(ctx, ns)()).NotTo(ContainElement(HaveField("Note", ContainSubstring("webhook"))), "the webhook was there all along")
	})

	// OFO's in-process scenario applies the Deployment before its two
	// InProcessConfigurations: its first pod may be admitted with one.
	It("rolls a Deployment whose pod was admitted with one of its two InProcessConfigurations once the other exists", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "first,second"})
		first := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"},
			Spec: v1beta1.InProcessConfigurationSpec{EnvVarPrefix: "my-prefix", CacheMaxSize: 11}}
		create(ctx, first, web)
		Eventually(pods(ctx, ns, "web")).Should(ContainElement(appEnv("my-prefix_MAX_CACHE_SIZE", "11")))
		Expect(pods(ctx, ns, "web")()[0].Annotations).To(HaveKeyWithValue(restarts.AnnotationUnresolved, "InProcessConfiguration "+ns+"/second"))

		second := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"},
			Spec: v1beta1.InProcessConfigurationSpec{EnvVarPrefix: "my-second-prefix", Host: "my-host"}}
		create(ctx, second)
		Eventually(pods(ctx, ns, "web"), 10*time.Second).Should(ContainElement(And(
			appEnv("my-second-prefix_HOST", "my-host"), appEnv("my-second-prefix_MAX_CACHE_SIZE", "11"))))
		Eventually(healEvents(ctx, ns)).Should(ContainElement(And(
			HaveField("Reason", webhooks.EventTargeted),
			HaveField("Note", ContainSubstring("InProcessConfiguration "+ns+"/second")))))
	})

	// Issue 24: a replica that admits a pod may learn of a new source after
	// the leader does, or the leader may start after the Deployment became
	// targeted; neither knows from memory whether the webhook saw the pod.
	// The pod's admission record tells, whichever process admitted it.
	It("says that a Deployment's pods were admitted before flagplane knew it was targeted, not that the webhook was missed, when it became targeted while the operator was down", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		web := deployment(ns, "web", nil, nil)
		create(ctx, flagSet(ns, "checkout"), web, source(ns, "flags", []v1beta1.Source{file("checkout")},
			func(s *v1beta1.FeatureFlagSource) {
				s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"flags": "yes"}}
			}))
		Eventually(pods(ctx, ns, "web")).Should(HaveLen(1))
		admitted := pods(ctx, ns, "web")()[0]
		Expect(admitted).NotTo(HaveSidecar())
		Expect(admitted.Annotations).To(HaveKeyWithValue(restarts.AnnotationAdmitted, restarts.AdmittedNothingToInject))

		By("the source's selector comes to match the Deployment while the operator is down: the process that heals never sees it become targeted")
		operator.stop()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(web), web)).To(Succeed())
		web.Labels = map[string]string{"flags": "yes"} // its own labels, not its pods': nothing rolls
		Expect(k8s.Update(ctx, web)).To(Succeed())
		operator = startOperator()

		Eventually(pods(ctx, ns, "web")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
		Eventually(healEvents(ctx, ns)).Should(ContainElement(And(
			HaveField("Reason", webhooks.EventTargeted),
			HaveField("Note", ContainSubstring("pod "+admitted.Name+" was admitted with nothing to inject, before flagplane knew the Deployment was targeted by FeatureFlagSource "+ns+"/flags")))))
		Expect(healEvents(ctx, ns)()).NotTo(ContainElement(HaveField("Reason", webhooks.EventInjectionMissing)), "the webhook saw the pod")
	})
})

// healEvents lists the Events the healer recorded in ns.
func healEvents(ctx context.Context, ns string) func() []eventsv1.Event {
	return func() []eventsv1.Event {
		var list eventsv1.EventList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Action == "Heal" {
				out = append(out, e)
			}
		}
		return out
	}
}
