package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/status"
)

var _ = Describe("the flagd-proxy provider", func() {
	It("streams the flag set from flagplane's sync server to flagd, which presents the namespace token admission gave it; deleting the FeatureFlag empties the flag set", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "off")
		create(ctx, ff, source(ns, "flags", "web", v1beta1.Source{Source: "checkout", Provider: v1beta1.SyncProviderFlagdProxy}),
			deployment(ns, "web", appImage, nil))

		pod := readyPod(ctx, ns, "web")
		Expect(sidecarOf(pod).Args).To(ContainElement(And(
			ContainSubstring(`"uri":"`+op.SyncAddress+`"`),
			ContainSubstring(`"selector":"`+syncserver.Selector(topology.FlagSetKey(ns, "checkout"))+`"`))))
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("the FeatureFlag's status counts the namespace's sync subscribers, which hold its revision")
		first := syncDelivered(ctx, ff, "")

		By("editing the FeatureFlag: pushed by the sync server")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))
		By("the status shows the sync subscribers holding the new revision")
		Expect(syncDelivered(ctx, ff, first)).NotTo(Equal(first))

		By("an in-process SDK selecting the flag set is counted as unobserved, never as confirmed")
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sdk"},
			Spec: v1beta1.InProcessConfigurationSpec{Selector: syncserver.Selector(topology.FlagSetKey(ns, "checkout"))}}
		reader := deployment(ns, "reader", appImage, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationInProcessConfiguration: "sdk"})
		reader.Spec.Replicas = ptr.To[int32](0)
		create(ctx, ipc, reader)
		Eventually(func(g Gomega) {
			got := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
			g.Expect(got.Status.Unobserved).To(PointTo(MatchFields(IgnoreExtras, Fields{
				"InProcess": BeEquivalentTo(1), "Workloads": BeZero(), "Reason": ContainSubstring("in-process")})))
			g.Expect(got.Status.Delivered).To(Equal("1/1"), "the SDK is no consumer of its own")
		}).Should(Succeed())
		Expect(k8s.Delete(ctx, ipc)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
			g.Expect(got.Status.Unobserved).To(BeNil())
		}).Should(Succeed())

		By("deleting the FeatureFlag: the sync server serves the flag set as empty")
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(resolve(addr)).Should(HaveField("Code", "not_found"))
		staysAsAdmitted(ctx, pod)
	})
})

// syncDelivered waits until the status of ff, at a revision other than
// before, counts the sync subscribers of its namespace (the workload's
// flagd, streaming from this process's sync server, which reports to
// itself as the leader) as one up-to-date consumer, and returns the revision.
func syncDelivered(ctx context.Context, ff *v1beta1.FeatureFlag, before string) string {
	GinkgoHelper()
	var revision string
	Eventually(func(g Gomega) {
		got := &v1beta1.FeatureFlag{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
		st := got.Status
		g.Expect(st.Revision).NotTo(BeEmpty())
		g.Expect(st.Revision).NotTo(Equal(before))
		g.Expect(st.Consumers).To(ConsistOf(MatchFields(IgnoreExtras, Fields{
			"Kind":      Equal(status.KindSyncSubscribers),
			"Namespace": Equal(ff.Namespace),
			"Name":      Equal(syncserver.Selector(topology.FlagSetKey(ff.Namespace, ff.Name))),
			"Revision":  Equal(st.Revision),
			"Since":     Not(BeNil()),
			"Streams":   BeEquivalentTo(1),
			"Current":   BeEquivalentTo(1),
		})))
		g.Expect(st.Delivered).To(Equal("1/1"))
		g.Expect(st.Unobserved).To(BeNil())
		revision = st.Revision
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return revision
}
