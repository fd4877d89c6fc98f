package realclients

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/fixtures"
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
		want, _, err := flagsets.Serve(ff)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.ReadFile(file)).To(BeEquivalentTo(want))
		Expect(os.Readlink(volume.Dir() + "/..data")).To(Equal(volume.Current()))
	})
})

var _ = Describe("what flagd answers of the flag sets flagplane generated", func() {
	It("names each flag's FeatureFlag and revision, when one flagd reads two flag sets that share a metadata key", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		checkout := checkoutFlags(ns, "checkout", "off")
		checkout.Spec.FlagSpec.Metadata = json.RawMessage(`{"team":"payments","flagplane.dev/revision":"forged"}`)
		search := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "search"}}
		search.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"ranking": {State: v1beta1.FlagStateEnabled,
			Variants: json.RawMessage(`{"v1":"v1","v2":"v2"}`), DefaultVariant: "v1", Metadata: json.RawMessage(`{"owner":"ranking"}`)}}
		search.Spec.FlagSpec.Metadata = json.RawMessage(`{"team":"discovery"}`)
		src := fixtures.Source(ns, "web-flags", []v1beta1.Source{
			{Source: "checkout", Provider: v1beta1.SyncProviderFile}, {Source: "search", Provider: v1beta1.SyncProviderFile},
		}, fixtures.Targeting("Deployment", "web"))
		create(ctx, checkout, search, src, deployment(ns, "web"))

		var args []string
		for _, ff := range []*v1beta1.FeatureFlag{checkout, search} {
			volume := kubelet(ctx, k8s, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(key(ff))})
			args = append(args, "--uri", "file:"+volume.path(topology.ConfigMapDataKey(key(ff))))
		}
		f := startFlagd(args...)
		revision := func(ff *v1beta1.FeatureFlag) string {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
			rendered, err := flagsets.Render(ff)
			Expect(err).NotTo(HaveOccurred())
			return flagsets.Revision(rendered)
		}
		stamped := func(ff *v1beta1.FeatureFlag, own map[string]any) map[string]any {
			md := map[string]any{flagsets.MetadataFlagSet: ff.Namespace + "/" + ff.Name, flagsets.MetadataRevision: revision(ff)}
			maps.Copy(md, own)
			return md
		}

		By("each flag answers with its own flag set's metadata, the shared key included, and flagplane's keys")
		Eventually(f.metadataOf("Boolean", "new-checkout")).Should(Equal(stamped(checkout, map[string]any{"team": "payments"})),
			"the flag set's own flagplane.dev/revision is left out")
		Eventually(f.metadataOf("String", "color")).Should(Equal(stamped(checkout, map[string]any{"team": "payments"})))
		Eventually(f.metadataOf("String", "ranking")).Should(Equal(stamped(search, map[string]any{"team": "discovery", "owner": "ranking"})))
		Eventually(flagSetRevision(ctx, checkout)).Should(Equal(revision(checkout)), "the revision status reports")

		By("an edit of one flag set changes its flags' revision, and no other's")
		first, searchRevision := revision(checkout), revision(search)
		setDefault(ctx, checkout, "on")
		Expect(revision(checkout)).NotTo(Equal(first))
		Eventually(f.metadataOf("Boolean", "new-checkout")).Should(HaveKeyWithValue(flagsets.MetadataRevision, revision(checkout)))
		Eventually(flagSetRevision(ctx, checkout)).Should(Equal(revision(checkout)))
		Expect(f.metadataOf("String", "ranking")()).To(HaveKeyWithValue(flagsets.MetadataRevision, searchRevision))
	})
})

// flagSetRevision is the revision a FeatureFlag's status reports.
func flagSetRevision(ctx context.Context, ff *v1beta1.FeatureFlag) func() (string, error) {
	return func() (string, error) {
		got := &v1beta1.FeatureFlag{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)
		return got.Status.Revision, err
	}
}

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
		By("its answers name the FeatureFlag and the revision the stream carried")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff)).To(Succeed())
		rendered, err := flagsets.Render(ff)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.metadataOf("Boolean", "new-checkout")()).To(Equal(map[string]any{
			flagsets.MetadataFlagSet: ns + "/checkout", flagsets.MetadataRevision: flagsets.Revision(rendered)}))

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
