package admission

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// The OpenFeature Operator injects into any pod that has an owner and opts
// in: pods of Jobs, CronJobs, bare ReplicaSets, Argo Rollouts... flagplane
// knows such workloads through their pods.
var _ = Describe("Pods of workloads other than Deployments, StatefulSets and DaemonSets", func() {
	optIn := map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "flags"}

	jobTemplate := func(app string) corev1.PodTemplateSpec {
		t := podTemplate(app, optIn)
		t.Spec.RestartPolicy = corev1.RestartPolicyNever
		return t
	}

	It("a Job's pod gets flagd and its flag set, which stays while the pod does", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}))
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backfill"},
			Spec: batchv1.JobSpec{Template: jobTemplate("backfill")}}
		create(ctx, job)
		Eventually(pods(ctx, ns, "backfill")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
		Consistently(configMap(ctx, ns, ns, "checkout"), "3s").Should(Succeed(),
			"the graph learns the Job from its pod: the ConfigMap is needed, not collected")
	})

	It("a CronJob's pods, through its Jobs", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}))
		cron := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: jobTemplate("nightly")}}}}
		create(ctx, cron)
		// A run, as the CronJob controller starts one (without waiting for 3 AM).
		run := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-run",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cron.Name, UID: cron.UID, Controller: ptr.To(true)}}},
			Spec: batchv1.JobSpec{Template: jobTemplate("nightly")}}
		create(ctx, run)
		Eventually(pods(ctx, ns, "nightly")).Should(ContainElement(And(HaveSidecar(), mountsFlagSet(ns, "checkout"))))
		Eventually(func() []topology.Key { return operator.admission.PodMutator.Graph.Topology().Snapshot().Workloads() }).
			Should(ContainElement(topology.WorkloadKey(topology.OwnerKind("batch", "CronJob"), ns, "nightly")))
	})

	It("a pod of any other owner that opts in", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}))
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "some-controller"}}
		create(ctx, owner)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned", Labels: map[string]string{"app": "owned"},
			Annotations:     optIn,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
			Spec: podTemplate("owned", nil).Spec}
		create(ctx, pod)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(*pod).To(And(HaveSidecar(), mountsFlagSet(ns, "checkout")))

		By("the pod deleted, its workload leaves the graph")
		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(func() []topology.Key { return operator.admission.PodMutator.Graph.Topology().Snapshot().Workloads() }).
			ShouldNot(ContainElement(topology.WorkloadKey(topology.OwnerKind("", "ConfigMap"), ns, "some-controller")))
	})

	It("a pod without an owner is left alone, with a warning", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, flagSet(ns, "checkout"), source(ns, "flags", []v1beta1.Source{file("checkout")}))
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "static", Annotations: optIn}, Spec: podTemplate("static", nil).Spec}
		create(ctx, pod)
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(*pod).NotTo(HaveSidecar())
	})
})
