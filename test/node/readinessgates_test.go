package node_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("a pod with a readiness gate", func() {
	It("is Ready only while the gate's condition, set by someone else through the status subresource, is True", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		const gate corev1.PodConditionType = "example.com/healthy"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gated"},
			Spec: corev1.PodSpec{
				NodeName:       n.Name(),
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
				Containers:     []corev1.Container{{Name: "app", Image: "app:1"}},
			},
		}
		create(ctx, pod)
		Eventually(getPod(ctx, key(pod))).Should(And(
			haveCondition(corev1.ContainersReady, corev1.ConditionTrue),
			HaveField("Status.Conditions", ContainElement(And(HaveField("Type", corev1.PodReady),
				HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "ReadinessGatesNotReady"))))))

		setGate := func(s corev1.ConditionStatus) {
			GinkgoHelper()
			patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{
				{Type: gate, Status: s, LastTransitionTime: metav1.Now()}}}})
			Expect(err).NotTo(HaveOccurred())
			// A strategic merge patch keeps the node's conditions (merge key type).
			Expect(k8s.Status().Patch(ctx, pod, client.RawPatch("application/strategic-merge-patch+json", patch))).To(Succeed())
		}
		By("the gate True: Ready, with no change of the node's own")
		setGate(corev1.ConditionTrue)
		Eventually(getPod(ctx, key(pod))).Should(beReady())
		By("the gate False: not Ready again")
		setGate(corev1.ConditionFalse)
		Eventually(getPod(ctx, key(pod))).Should(haveCondition(corev1.PodReady, corev1.ConditionFalse))
		Consistently(getPod(ctx, key(pod))).Should(And(haveCondition(corev1.PodReady, corev1.ConditionFalse),
			haveCondition(gate, corev1.ConditionFalse)), "the node left the gate's condition alone")
	})
})
