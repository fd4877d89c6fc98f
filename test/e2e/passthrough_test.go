package e2e

import (
	"net/http"
	"net/http/httptest"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Sources flagplane passes through to flagd: it writes them into the
// sidecar's --sources and nothing else. Deleting the source changes no
// running pod (admission acts when a pod is created, and rolloutOnChange is
// off): the running flagd keeps syncing from where it was told, and only a
// pod created afterwards comes without flagd.
var _ = Describe("passthrough sources", func() {
	It("grpc: flagd syncs from a standalone flagd on the node and follows its edits; deleting the source leaves the running pod as it was admitted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		up := startUpstream(ctx, ns, "off")
		create(ctx, source(ns, "flags", "web", v1beta1.Source{Source: "grpc://" + up.syncAddr, Provider: v1beta1.SyncProviderGRPC}),
			deployment(ns, "web", appImage, nil))

		pod := readyPod(ctx, ns, "web")
		Expect(sidecarOf(pod).Args).To(ContainElement(ContainSubstring(`{"uri":"` + up.syncAddr + `","provider":"grpc"}`)))
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("editing the upstream's flags")
		up.setVariant(ctx, "on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))

		By("deleting the source")
		Expect(k8s.Delete(ctx, source(ns, "flags", "web", v1beta1.Source{}))).To(Succeed())
		up.setVariant(ctx, "off")
		Eventually(resolve(addr)).Should(Equal(evaluated("off")), "the running flagd still syncs from the upstream")
		staysAsAdmitted(ctx, pod)
		Expect(replacePod(ctx, pod).Spec.InitContainers).To(BeEmpty(), "a pod admitted now gets no flagd")
	})

	It("http: flagd polls an HTTP server of the test's and follows its edits; deleting the source leaves the running pod as it was admitted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		var mu sync.Mutex
		served := flagFile("off")
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(served))
		}))
		DeferCleanup(srv.Close)
		serve := func(variant string) {
			mu.Lock()
			defer mu.Unlock()
			served = flagFile(variant)
		}
		url := srv.URL + "/flags.json"
		create(ctx, source(ns, "flags", "web", v1beta1.Source{Source: url, Provider: v1beta1.SyncProviderHTTP, Interval: 1}),
			deployment(ns, "web", appImage, nil))

		pod := readyPod(ctx, ns, "web")
		Expect(sidecarOf(pod).Args).To(ContainElement(ContainSubstring(`{"uri":"` + url + `","provider":"http","interval":1}`)))
		addr := flagdAddr(pod)
		Eventually(resolve(addr)).Should(Equal(evaluated("off")))

		By("editing what the server serves")
		serve("on")
		Eventually(resolve(addr)).Should(Equal(evaluated("on")))

		By("deleting the source")
		Expect(k8s.Delete(ctx, source(ns, "flags", "web", v1beta1.Source{}))).To(Succeed())
		serve("off")
		Eventually(resolve(addr)).Should(Equal(evaluated("off")), "the running flagd still polls the server")
		staysAsAdmitted(ctx, pod)
		Expect(replacePod(ctx, pod).Spec.InitContainers).To(BeEmpty(), "a pod admitted now gets no flagd")
	})
})
