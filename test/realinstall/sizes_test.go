package realinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// A flag set larger than a ConfigMap holds, delivered the ways that can
// carry it, with Pods the real kubelet runs from what admission wrote.
var _ = Describe("a flag set larger than a ConfigMap on a real node", func() {
	optedIn := map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}

	It("2,500 flags, 1.2 MB: flagd streams it from the sync server through its Service, and reads it from the API server with the kubernetes provider; a flag evaluates in both", func(ctx SpecContext) {
		ns := newNamespace(ctx, "sizes")
		ff := largeFlagSet(ns, "big", 2500)
		content, _, err := flagsets.Serve(ff)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(content)).To(BeNumerically(">", topology.ConfigMapMaxBytes), "more than a ConfigMap holds")
		AddReportEntry("rendered size", len(content))

		proxy := app(ns, "proxy", optedIn)
		kube := app(ns, "kube", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "kube"})
		kube.Spec.Template.Spec.ServiceAccountName = "kube"
		created := time.Now()
		create(ctx, ff)
		create(ctx,
			// The flagd-proxy sidecar serves it within the default 64M when
			// run alone; in one run of the whole suite, two packages at a
			// time on two cores, "its flagd" refused connections for two
			// minutes after the pod was Ready. That was likely a pod
			// admitted before the manager had the source, with no flagd
			// (injectedPod now waits past it); it keeps 128M to spare.
			fixtures.Source(ns, "src", []v1beta1.Source{{Source: "big", Provider: v1beta1.SyncProviderFlagdProxy}},
				func(s *v1beta1.FeatureFlagSource) {
					s.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128M")}
				}),
			// flagd's kubernetes sync holds the stored object besides the
			// flags it parsed: with a flag set of 1.2 MB it passes the
			// sidecar's default 64M memory limit and is OOMKilled on the
			// real kubelet (CI saw it); such a source asks for more, as
			// docs/limits.md says.
			fixtures.Source(ns, "kube", []v1beta1.Source{{Source: "big", Provider: v1beta1.SyncProviderKubernetes}},
				func(s *v1beta1.FeatureFlagSource) {
					s.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256M")}
				}),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube"}}, proxy, kube)

		for _, name := range []string{"proxy", "kube"} {
			pod := injectedPod(ctx, ns, name)
			Eventually(resolveKey(flagdAddr(pod), largeFlagKey(2499))).WithTimeout(deliveryTimeout).WithPolling(poll).
				Should(Equal(evaluated("on")), func() string { return name + "\n" + podReport(ctx, ns) })
			AddReportEntry(name+": create to the last flag served", fmtDuration(time.Since(created)))
		}
		Eventually(streamsOf(ctx, ff)).WithTimeout(deliveryTimeout).Should(Equal(int32(1)), "the sync stream, in the FeatureFlag's status")
	})
})

// largeFlagSet is a FeatureFlag of n boolean flags at "on", each with a
// description of 360 bytes: about 480 bytes a flag rendered for flagd.
func largeFlagSet(ns, name string, n int) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = make(map[string]v1beta1.Flag, n)
	description, _ := json.Marshal(map[string]string{"description": strings.Repeat("d", 360)})
	for i := range n {
		ff.Spec.FlagSpec.Flags[largeFlagKey(i)] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, DefaultVariant: "on",
			Variants: []byte(`{"on":true,"off":false}`), Metadata: description}
	}
	return ff
}

func largeFlagKey(i int) string { return fmt.Sprintf("flag-%05d", i) }

// resolveKey evaluates a boolean flag of the given key at addr.
func resolveKey(addr, key string) func() (evaluation, error) {
	return func() (evaluation, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return flagdapi.Resolve(ctx, addr, flagdapi.Boolean, key, nil)
	}
}
