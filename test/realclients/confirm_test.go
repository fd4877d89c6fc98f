package realclients

import (
	"context"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/confirm"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/outbound"
)

var _ = Describe("confirming what flagd serves, from its own sync service", func() {
	It("tells the revision flagd serves, not the one flagplane wrote: behind a kubelet that has not synced, and after content flagd refuses", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := checkoutFlags(ns, "checkout", "off")
		create(ctx, ff, webSource(ns, v1beta1.SyncProviderFile), deployment(ns, "web"))
		cm := client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(key(ff))}
		dataKey := topology.ConfigMapDataKey(key(ff))
		name := ns + "/checkout"

		// A kubelet that projects the ConfigMap only when told: its sync
		// period, made as long as the spec needs.
		volume := newProjectedVolume()
		project := func() string {
			got := &corev1.ConfigMap{}
			Expect(k8s.Get(ctx, cm, got)).To(Succeed())
			volume.write(got.Data)
			return got.Data[dataKey]
		}
		Eventually(func() error { return k8s.Get(ctx, cm, &corev1.ConfigMap{}) }).Should(Succeed())
		project()
		f := startFlagd("--uri", "file:"+volume.path(dataKey))
		reader := outbound.New(outbound.Client{})
		address := "127.0.0.1:" + strconv.Itoa(f.syncPort)
		served := func() (confirm.Served, error) { return confirm.Read(ctx, reader, address) }
		revision := func() string {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
			_, r, err := flagsets.Serve(ff)
			Expect(err).NotTo(HaveOccurred())
			return r
		}

		first := revision()
		Eventually(served).Should(HaveField("FlagSets", HaveKeyWithValue(name, confirm.FlagSet{Flags: 2, Revisions: []string{first}})))

		By("an edit flagplane has written, and whose status says delivered, that the kubelet has not projected yet")
		setDefault(ctx, ff, "on")
		second := revision()
		Eventually(flagSetStatus(ctx, ff)).Should(And(HaveField("Revision", second), HaveField("Delivered", "1/1")))
		s, err := served()
		Expect(err).NotTo(HaveOccurred())
		ok, why := s.Confirm(name, second, 2)
		Expect(ok).To(BeFalse(), "flagd still serves the first revision")
		Expect(why).To(Equal("flagd serves revision " + first[:12] + " of FeatureFlag " + name))

		By("the kubelet projects it")
		Expect(project()).To(ContainSubstring(second))
		Eventually(func() (bool, error) {
			s, err := served()
			ok, _ := s.Confirm(name, second, 2)
			return ok, err
		}).Should(BeTrue())

		By("content flagd cannot load: it keeps serving the revision before, and says so")
		volume.write(map[string]string{dataKey: `{"flags":{"new-checkout":`})
		Eventually(f.outputLines).Should(ContainElement(ContainSubstring("failed to unmarshal")), "flagd refused it")
		Consistently(served, "2s").Should(HaveField("FlagSets", HaveKeyWithValue(name, confirm.FlagSet{Flags: 2, Revisions: []string{second}})))

		By("a flagd that is gone confirms nothing")
		f.stop()
		_, err = served()
		Expect(err).To(MatchError("connection refused"))
	})
})

// flagSetStatus is the status of a FeatureFlag in the cluster.
func flagSetStatus(ctx context.Context, ff *v1beta1.FeatureFlag) func() (v1beta1.FeatureFlagStatus, error) {
	return func() (v1beta1.FeatureFlagStatus, error) {
		got := &v1beta1.FeatureFlag{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)
		return got.Status, err
	}
}
