package counts

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/internal/bigflagset"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

var _ = Describe("a flag set with 10,000 flags", Ordered, func() {
	const count = 10_000
	var ns string
	var ff *v1beta1.FeatureFlag

	BeforeAll(func(ctx SpecContext) {
		ns = newNamespace(ctx, "")
		ff = bigflagset.FlagSet(ns, "large", count)
	})

	It("is validated, rendered and put in the graph in well under the webhook's 5 s", func() {
		began := time.Now()
		errs, warnings := flagsets.ValidateFlagSpec(&ff.Spec.FlagSpec, field.NewPath("spec", "flagSpec"))
		validated := time.Since(began)
		Expect(errs).To(BeEmpty())
		Expect(warnings).To(BeEmpty())
		began = time.Now()
		content, _, err := flagsets.Serve(ff)
		rendered := time.Since(began)
		Expect(err).NotTo(HaveOccurred())
		topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
		began = time.Now()
		_, err = topo.UpsertFlagSet(ff)
		edited := time.Since(began)
		Expect(err).NotTo(HaveOccurred())
		edit := ff.DeepCopy()
		f := edit.Spec.FlagSpec.Flags[bigflagset.Key(count-1)]
		f.DefaultVariant = "off"
		edit.Spec.FlagSpec.Flags[bigflagset.Key(count-1)] = f
		began = time.Now()
		_, err = topo.UpsertFlagSet(edit)
		reedited := time.Since(began)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("10,000 flags, in this process", fmt.Sprintf("validation %v, rendering %v (%d bytes), graph edit %v (first) and %v (one flag changed)",
			validated, rendered, len(content), edited, reedited))
	})

	It("is admitted, as the API server times the webhook: p50 and max of 7 dry runs, logged", func(ctx SpecContext) {
		var took []time.Duration
		timeouts := 0
		for i := 0; len(took) < 7 && timeouts < 7; i++ {
			probe := ff.DeepCopy()
			probe.Name = fmt.Sprintf("dry-%d", i)
			var err error
			d := timedCall(ctx, featureFlagWebhook, func() { err = k8s.Create(ctx, probe, client.DryRunAll) })
			if err != nil {
				// Starved of CPU on a shared machine: counted, not timed.
				Expect(err).To(MatchError(ContainSubstring("failed calling webhook")))
				timeouts++
				continue
			}
			took = append(took, d)
		}
		Expect(took).NotTo(BeEmpty())
		p50, maximum := percentiles(took)
		AddReportEntry("FeatureFlag webhook, 10,000 flags", fmt.Sprintf("p50 %v, max %v of %d dry runs (timeoutSeconds: 5); %d more timed out",
			p50, maximum, len(took), timeouts))

		began := time.Now()
		webhook := timedCall(ctx, featureFlagWebhook, func() { create(ctx, ff) })
		AddReportEntry("FeatureFlag of 10,000 flags created", fmt.Sprintf("%v in all, %v in the webhook", time.Since(began), webhook))
	})

	It("is delivered by each mode: the 10,000th flag evaluates", func(ctx SpecContext) {
		apps := map[v1beta1.SyncProviderType]string{v1beta1.SyncProviderFile: "by-file", v1beta1.SyncProviderKubernetes: "by-kubernetes", v1beta1.SyncProviderFlagdProxy: "by-proxy"}
		for provider, app := range apps {
			create(ctx, fixtures.Source(ns, app, []v1beta1.Source{{Source: "large", Provider: provider}}, fixtures.Targeting("Deployment", app)),
				deployment(ns, app, nil))
		}
		for provider, app := range apps {
			pod := readyPod(ctx, ns, app, injected(), 2*time.Minute)
			Eventually(resolve(flagdAddr(pod), bigflagset.Key(count-1))).Should(Equal(on), string(provider))
		}
		Eventually(func(g Gomega) {
			got := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
			g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", v1beta1.ConditionReady), HaveField("Status", metav1.ConditionTrue))))
		}).Should(Succeed())
	})

	It("fits the API server up to about 17,000 flags of this size", func(ctx SpecContext) {
		search, err := bigflagset.LargestStored(ctx, k8s, ff)
		Expect(err).NotTo(HaveOccurred())
		largest, refusal := search.Largest, search.Refusal
		AddReportEntry("largest FeatureFlag stored", fmt.Sprintf("%d flags of about 90 bytes (found with %d creates from a prediction of %d); one more: %s",
			largest, search.Creates, search.Predicted, refusal))
		Expect(refusal).To(ContainSubstring("request is too large"))
		Expect(largest).To(BeNumerically(">=", count))
		Expect(strings.Contains(refusal, "flagplane")).To(BeFalse(), "refused by the API server's storage, not by flagplane")
	})
})
