package realclients

import (
	"encoding/json"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

var _ = Describe("flagd reading the ConfigMap flagplane generated", func() {
	It("evaluates the generated content, and the edited content once the kubelet swaps the projection", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := checkoutFlags(ns, "checkout", "off")
		src := webSource(ns, v1beta1.SyncProviderFile)
		create(ctx, ff, src, deployment(ns, "web"))

		volume := kubelet(ctx, k8s, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(key(ff))})
		file := volume.path(topology.ConfigMapDataKey(key(ff)))
		f := startFlagd("--uri", "file:"+file)

		Eventually(f.resolve("Boolean", "new-checkout", nil)).Should(Equal(evaluation{Value: false, Variant: "off", Reason: "STATIC"}))
		Eventually(f.resolve("String", "color", map[string]any{"tier": "gold"})).Should(Equal(evaluation{Value: "red", Variant: "red", Reason: "TARGETING_MATCH"}))
		Eventually(f.resolve("String", "color", map[string]any{"tier": "silver"})).Should(Equal(evaluation{Value: "blue", Variant: "blue", Reason: "DEFAULT"}))
		Eventually(f.resolve("Boolean", "no-such-flag", nil)).Should(HaveField("Code", "not_found"))

		By("editing the FeatureFlag")
		setDefault(ctx, ff, "on")
		Eventually(f.resolve("Boolean", "new-checkout", nil)).Should(Equal(evaluation{Value: true, Variant: "on", Reason: "STATIC"}))

		By("the file flagd read is exactly what flagplane rendered, behind a swapped ..data symlink")
		want, err := flagsets.Render(ff)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.ReadFile(file)).To(BeEquivalentTo(want))
		Expect(os.Readlink(volume.Dir() + "/..data")).To(Equal(volume.Current()))
	})
})

var _ = Describe("flagd syncing from flagplane's sync server", func() {
	It("evaluates the flag set served over gRPC, and an edit arrives by push", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := checkoutFlags(ns, "checkout", "off")
		src := webSource(ns, v1beta1.SyncProviderFlagdProxy)
		create(ctx, ff, src, deployment(ns, "web"))

		By("configuring flagd the way the injected sidecar is configured")
		host, port := splitHostPort(syncAddr)
		uri, selector := syncserver.SidecarSource(key(ff), syncserver.SidecarOptions{Host: host, Port: port})
		token, err := namespaceTokens.Issue(ns)
		Expect(err).NotTo(HaveOccurred())
		sources, err := json.Marshal([]map[string]any{{
			"uri": uri, "provider": "grpc", "selector": selector, "headers": syncserver.SidecarHeaders(token),
		}})
		Expect(err).NotTo(HaveOccurred())
		f := startFlagd("--sources", string(sources))

		Eventually(f.resolve("Boolean", "new-checkout", nil)).Should(Equal(evaluation{Value: false, Variant: "off", Reason: "STATIC"}))
		Eventually(f.resolve("String", "color", map[string]any{"tier": "gold"})).Should(Equal(evaluation{Value: "red", Variant: "red", Reason: "TARGETING_MATCH"}))

		By("editing the FeatureFlag: the stream pushes it, flagd never polls")
		sent := syncSrv.Stats().Sent
		edited := time.Now()
		setDefault(ctx, ff, "on")
		Eventually(f.resolve("Boolean", "new-checkout", nil), 10*time.Second, 20*time.Millisecond).
			Should(Equal(evaluation{Value: true, Variant: "on", Reason: "STATIC"}))
		AddReportEntry("edit to new value in flagd over gRPC", time.Since(edited).String())
		Expect(syncSrv.Stats().Sent).To(BeNumerically(">", sent))

		By("deleting the FeatureFlag empties the flag set")
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(f.resolve("Boolean", "new-checkout", nil)).Should(HaveField("Code", "not_found"))
	})

	It("is refused a flag set of a namespace that did not grant it", func(ctx SpecContext) {
		owner, other := newNamespace(ctx), newNamespace(ctx)
		ff := checkoutFlags(owner, "checkout", "on")
		create(ctx, ff)

		host, port := splitHostPort(syncAddr)
		uri, selector := syncserver.SidecarSource(key(ff), syncserver.SidecarOptions{Host: host, Port: port})
		token, err := namespaceTokens.Issue(other)
		Expect(err).NotTo(HaveOccurred())
		sources, _ := json.Marshal([]map[string]any{{
			"uri": uri, "provider": "grpc", "selector": selector, "headers": syncserver.SidecarHeaders(token),
		}})
		refusedBefore := syncRefusals("PermissionDenied")
		f := startFlagd("--sources", string(sources))
		Eventually(f.outputLines).Should(ContainElement(ContainSubstring("PermissionDenied")))
		Consistently(f.resolve("Boolean", "new-checkout", nil), time.Second).Should(HaveField("Code", "not_found"))
		Expect(syncRefusals("PermissionDenied")).To(BeNumerically(">", refusedBefore),
			"flagplane_sync_refusals_total{code=PermissionDenied} counts flagd's refused calls")
	})
})
