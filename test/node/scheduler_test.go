package node_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/fixtures"
)

var _ = Describe("a Deployment", func() {
	It("gets its pods scheduled to the node by kube-scheduler, and completes its rollout", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		deploy := fixtures.Deployment(ns, "web", nil, nil)
		two := int32(2)
		deploy.Spec.Replicas = &two
		created := time.Now()
		create(ctx, deploy)

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Status.AvailableReplicas).To(Equal(two))
			g.Expect(deploy.Status.UpdatedReplicas).To(Equal(two))
		}).WithPolling(20*time.Millisecond).Should(Succeed(), "the Deployment never became available")
		AddReportEntry("Deployment of 2 replicas created to available", time.Since(created).String())

		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		var pids []int
		for i := range pods.Items {
			p := &pods.Items[i]
			Expect(p.Spec.NodeName).To(Equal(n.Name()))
			Expect(p).To(And(beReady(), haveCondition(corev1.PodScheduled, corev1.ConditionTrue)))
			for _, c := range p.Spec.Containers {
				pids = append(pids, pidOf(key(p), c.Name))
			}
		}

		By("scaling to zero stops the processes and removes the pods")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
				return err
			}
			zero := int32(0)
			deploy.Spec.Replicas = &zero
			return k8s.Update(ctx, deploy)
		}).Should(Succeed())
		Eventually(func() ([]corev1.Pod, error) {
			var pods corev1.PodList
			err := k8s.List(ctx, &pods, client.InNamespace(ns))
			return pods.Items, err
		}).WithTimeout(time.Minute).Should(BeEmpty())
		for _, pid := range pids {
			Expect(processGone(pid)()).To(BeTrue())
		}
	})
})
