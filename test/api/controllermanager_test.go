package api

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These specs pin down what kube-controller-manager does for the suites,
// since flagplane's own specs rely on it: Pods from workloads, garbage
// collection by ownerReferences, namespace deletion.
var _ = Describe("kube-controller-manager", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx, "kcm") })

	It("gives a Deployment a ReplicaSet and Pods, admitted with the default ServiceAccount", func(ctx SpecContext) {
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}},
				Template: podTemplate("checkout"),
			},
		}
		Expect(k8s.Create(ctx, deploy)).To(Succeed())

		var rs appsv1.ReplicaSet
		Eventually(func(g Gomega) {
			var list appsv1.ReplicaSetList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			rs = list.Items[0]
			g.Expect(metav1.IsControlledBy(&rs, deploy)).To(BeTrue())
		}).WithContext(ctx).Should(Succeed())

		Eventually(func(g Gomega) {
			pods := podsOf(g, ctx, ns, "checkout")
			g.Expect(pods).To(HaveLen(2))
			for _, pod := range pods {
				g.Expect(metav1.IsControlledBy(&pod, &rs)).To(BeTrue())
				g.Expect(pod.Spec.ServiceAccountName).To(Equal("default"))
				g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending), "no scheduler, no kubelet")
			}
		}).WithContext(ctx).Should(Succeed())
	})

	It("gives a StatefulSet its Pods", func(ctx SpecContext) {
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](2),
				// Parallel: with OrderedReady the second Pod would wait for
				// the first to become Ready, which never happens here.
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ledger"}},
				Template:            podTemplate("ledger"),
			},
		}
		Expect(k8s.Create(ctx, sts)).To(Succeed())

		Eventually(func(g Gomega) []string {
			var names []string
			for _, pod := range podsOf(g, ctx, ns, "ledger") {
				g.Expect(metav1.IsControlledBy(&pod, sts)).To(BeTrue())
				names = append(names, pod.Name)
			}
			return names
		}).WithContext(ctx).Should(ConsistOf("ledger-0", "ledger-1"))
	})

	It("accepts a DaemonSet, which gets no Pods without nodes", func(ctx SpecContext) {
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "node-agent"}},
				Template: podTemplate("node-agent"),
			},
		}
		Expect(k8s.Create(ctx, ds)).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ds), ds)).To(Succeed())
			g.Expect(ds.Status.ObservedGeneration).To(Equal(ds.Generation), "the daemonset controller has seen it")
			g.Expect(ds.Status.DesiredNumberScheduled).To(BeZero())
		}).WithContext(ctx).Should(Succeed())
		Consistently(func(g Gomega) []corev1.Pod {
			return podsOf(g, ctx, ns, "node-agent")
		}).WithContext(ctx).Should(BeEmpty())
	})

	It("garbage-collects a ConfigMap owned by a deleted Deployment, and not before", func(ctx SpecContext) {
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "owner"}},
				Template: podTemplate("owner"),
			},
		}
		Expect(k8s.Create(ctx, deploy)).To(Succeed())
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "owned",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "apps/v1", Kind: "Deployment", Name: deploy.Name, UID: deploy.UID,
				}},
			},
			Data: map[string]string{"flags.json": "{}"},
		}
		Expect(k8s.Create(ctx, cm)).To(Succeed())

		// A wrong ownerReference would be collected at once: the ConfigMap
		// must stay while its owner exists.
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		}).WithContext(ctx).Should(Succeed())

		Expect(k8s.Delete(ctx, deploy)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}))
		}).WithContext(ctx).Should(BeTrue())
	})

	It("deletes a namespace with what is in it", func(ctx SpecContext) {
		doomed, err := cp.NewNamespace(ctx, "doomed")
		Expect(err).NotTo(HaveOccurred())
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: doomed, Name: "content"}}
		Expect(k8s.Create(ctx, cm)).To(Succeed())

		Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}})).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Name: doomed}, &corev1.Namespace{})
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Satisfy(apierrors.IsNotFound))
	})
})

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			// Never pulled: there is no kubelet.
			Containers: []corev1.Container{{Name: app, Image: fmt.Sprintf("%s:1.0", app)}},
		},
	}
}

func podsOf(g Gomega, ctx SpecContext, ns, app string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	return pods.Items
}
