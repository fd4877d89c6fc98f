package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

var _ = Describe("the file provider", func() {
	It("mounts the generated ConfigMap into flagd, which serves every edit; deleting the FeatureFlag deletes the ConfigMap, and flagd keeps its last projection as under a kubelet", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "off")
		f := topology.FlagSetKey(ns, "checkout")
		create(ctx, ff, source(ns, "flags", "web", fixtures.FileRef("checkout")), deployment(ns, "web", appImage, nil))

		pod := readyPod(ctx, ns, "web")
		Expect(pod.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", topology.ConfigMapName(f))))
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))
		pid := pidOf(pod, injection.SidecarName)

		By("editing the FeatureFlag: ConfigMap, the node's ..data swap, flagd's file watch")
		setVariant(ctx, ff, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))
		Expect(pidOf(pod, injection.SidecarName)).To(Equal(pid), "flagd followed the edit without a restart")

		By("deleting the FeatureFlag")
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(f)}, &corev1.ConfigMap{})
		}).Should(Satisfy(apierrors.IsNotFound), "flagplane deletes the ConfigMap no workload can use")
		// A kubelet cannot re-project a volume whose ConfigMap is gone: it
		// says so and leaves the files as they were. So does the node.
		Eventually(eventsAbout(ctx, ns, "Pod", pod.Name)).Should(ContainElement(And(
			HaveField("Reason", "FailedMount"),
			HaveField("Note", ContainSubstring(`configmap "`+topology.ConfigMapName(f)+`" not found`)))))
		Consistently(resolve(addr)).Should(Equal(evaluated("on")), "flagd serves its last projection")
		Expect(n.ReadFile(key(pod), injection.SidecarName, injection.FlagFilePath(f))).To(ContainSubstring(`"defaultVariant":"on"`))
		Expect(podsOf(ctx, ns, "web")()).To(ConsistOf(And(HaveField("Name", pod.Name), beReady())),
			"the workload is not rolled: admission changes pods only when they are created")
	})
})
