package realinstall

import (
	"context"
	"fmt"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/workflows/confirm"
	"github.com/flagplane/flagplane/workflows/outbound"
)

// editTimes are the moments one edit reached, from the edit: its copies
// holding it (status, written), the pod's flagd answering with it (asked
// directly, served), and status saying so (confirmed). Zero: not reached.
type editTimes struct {
	written, served, confirmed time.Duration
	// ahead counts the moments status said the pod serves the revision
	// while its flagd, asked right after, did not.
	ahead int
}

// watched is a FeatureFlag and the pod whose flagd serves it; confirmable
// is false for the kubernetes provider (flagd reads the FeatureFlag
// itself, and no status counts it).
type watched struct {
	ff          *v1beta1.FeatureFlag
	pod         *corev1.Pod
	confirmable bool
}

// watchEdits polls, every 20 ms from edited, the status of each FeatureFlag
// and the flagd of its pod, all at once, until every pod serves variant of
// flag and status says so where it can. Status is read before flagd each
// time: flagd never goes back to an older revision, so a status ahead of
// flagd shows.
func watchEdits(ctx context.Context, ws []watched, flag, variant string, edited time.Time) []editTimes {
	GinkgoHelper()
	out := make([]editTimes, len(ws))
	reader := outbound.New(outbound.Client{})
	Eventually(func() bool {
		done := true
		for i, w := range ws {
			t := &out[i]
			var cur v1beta1.FeatureFlag
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(w.ff), &cur); err != nil {
				return false
			}
			st := cur.Status
			current := st.ObservedGeneration == cur.Generation && cur.Generation >= w.ff.Generation
			if current && t.written == 0 && deliveredAll(st.Delivered) {
				t.written = time.Since(edited)
			}
			if w.confirmable && current && t.confirmed == 0 {
				for _, s := range st.Serving {
					if s.Namespace != w.pod.Namespace || s.Pods == 0 || s.Confirmed != s.Pods || s.Revision != st.Revision {
						continue
					}
					served, err := confirm.Read(ctx, reader, net.JoinHostPort(w.pod.Status.PodIP, "8015"))
					Expect(err).NotTo(HaveOccurred())
					if ok, why := served.Confirm(w.ff.Namespace+"/"+w.ff.Name, st.Revision, len(cur.Spec.FlagSpec.Flags)); !ok {
						t.ahead++
						AddReportEntry(fmt.Sprintf("status ahead of flagd: status says revision %s, %s", st.Revision, why))
					}
					t.confirmed = time.Since(edited)
				}
			}
			if t.served == 0 {
				if e, err := flagdapi.Resolve(ctx, flagdAddr(w.pod), flagdapi.Int, flag, nil); err == nil && e.Variant == variant {
					t.served = time.Since(edited)
				}
			}
			done = done && t.served > 0 && (!w.confirmable || t.confirmed > 0)
		}
		return done
	}).WithTimeout(4*time.Minute).WithPolling(20*time.Millisecond).Should(BeTrue(), "edit to %s", variant)
	return out
}

// deliveredAll tells whether "<up to date>/<all>" counts every consumer.
func deliveredAll(d string) bool {
	var n, all int
	_, err := fmt.Sscanf(d, "%d/%d", &n, &all)
	return err == nil && all > 0 && n == all
}

var _ = Describe("confirmed delivery on a real node", func() {
	It("file and flagd-proxy: status says a pod serves a revision only once its flagd answers with it, never before; the kubelet's projection shows between written and confirmed", func(ctx SpecContext) {
		ns := newNamespace(ctx, "confirm")
		type reader struct {
			provider v1beta1.SyncProviderType
			ff       *v1beta1.FeatureFlag
			pod      *corev1.Pod
		}
		readers := []*reader{{provider: v1beta1.SyncProviderFile}, {provider: v1beta1.SyncProviderFlagdProxy}}
		for _, r := range readers {
			name := "flags-" + string(r.provider)
			r.ff = revisionFlagSet(ns, name)
			src := "src-" + string(r.provider)
			create(ctx, r.ff, fixtures.Source(ns, src, []v1beta1.Source{{Source: name, Provider: r.provider}}),
				app(ns, "web-"+string(r.provider), map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: src}))
		}
		for _, r := range readers {
			r.pod = injectedPod(ctx, ns, "web-"+string(r.provider))
		}
		ws := make([]watched, len(readers))
		for i, r := range readers {
			ws[i] = watched{ff: r.ff, pod: r.pod, confirmable: true}
		}
		for i := 1; i <= 3; i++ {
			variant := fmt.Sprintf("r%d", i)
			edited := time.Now()
			for _, r := range readers {
				setRevision(ctx, r.ff, variant)
			}
			for j, t := range watchEdits(ctx, ws, revisionFlag, variant, edited) {
				p := readers[j].provider
				Expect(t.ahead).To(BeZero(), "%s: status ahead of flagd", p)
				AddReportEntry(fmt.Sprintf("%s edit %d", p, i),
					fmt.Sprintf("written %s, served %s, confirmed %s", fmtDuration(t.written), fmtDuration(t.served), fmtDuration(t.confirmed)))
			}
		}
	})
})

// setRevision sets the revision flag's default variant.
func setRevision(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	GinkgoHelper()
	Eventually(func() error {
		var cur v1beta1.FeatureFlag
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &cur); err != nil {
			return err
		}
		f := cur.Spec.FlagSpec.Flags[revisionFlag]
		f.DefaultVariant = variant
		cur.Spec.FlagSpec.Flags[revisionFlag] = f
		if err := k8s.Update(ctx, &cur); err != nil {
			return err
		}
		ff.Generation = cur.Generation
		return nil
	}).Should(Succeed())
}
