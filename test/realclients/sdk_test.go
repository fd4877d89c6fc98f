package realclients

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// sdkClient runs the OpenFeature Go SDK with flagd's in-process provider
// against the sync server, evaluating flagKey.
func sdkClient(selector, tokenFile, flagKey string) *process {
	return startProcess(binary("flagplane-sdkclient"),
		"-target", syncAddr, "-selector", selector, "-token-file", tokenFile, "-flag", flagKey, "-type", "boolean")
}

// evaluations decodes the evaluations the SDK client reported so far.
func evaluations(p *process) func() []evaluation {
	return func() []evaluation {
		var out []evaluation
		for _, l := range p.outputLines() {
			var e struct {
				evaluation
				ErrorCode string `json:"errorCode"`
			}
			if strings.HasPrefix(l, `{"errorCode"`) && json.Unmarshal([]byte(l), &e) == nil {
				e.Code = e.ErrorCode
				out = append(out, e.evaluation)
			}
		}
		return out
	}
}

// flagMetadata is the flag metadata of the SDK client's last evaluation.
func flagMetadata(p *process) func() map[string]any {
	return func() map[string]any {
		var md map[string]any
		for _, l := range p.outputLines() {
			var e struct {
				Metadata map[string]any `json:"metadata"`
			}
			if strings.HasPrefix(l, `{"errorCode"`) && json.Unmarshal([]byte(l), &e) == nil {
				md = e.Metadata
			}
		}
		return md
	}
}

func lastEvaluation(want evaluation) types.GomegaMatcher {
	return WithTransform(func(es []evaluation) evaluation {
		if len(es) == 0 {
			return evaluation{}
		}
		return es[len(es)-1]
	}, Equal(want))
}

var _ = Describe("the OpenFeature Go SDK in in-process mode", func() {
	It("evaluates flags synced from the sync server, follows an edit, and is refused other namespaces' flag sets", func(ctx SpecContext) {
		ns, other := newNamespace(ctx), newNamespace(ctx)
		ff := checkoutFlags(ns, "checkout", "off")
		foreign := checkoutFlags(other, "secret", "on")
		create(ctx, ff, foreign)
		token := serviceAccountToken(ctx, ns, "default")

		client := sdkClient(syncserver.Selector(key(ff)), token, "new-checkout")
		Eventually(evaluations(client)).Should(lastEvaluation(evaluation{Value: false, Variant: "off", Reason: "STATIC"}))
		Expect(client.outputLines()).To(ContainElement(ContainSubstring("PROVIDER_READY")))

		By("editing the FeatureFlag")
		edited := time.Now()
		setDefault(ctx, ff, "on")
		Eventually(evaluations(client), 10*time.Second, 20*time.Millisecond).
			Should(lastEvaluation(evaluation{Value: true, Variant: "on", Reason: "STATIC"}))
		AddReportEntry("edit to new value in the SDK", time.Since(edited).String())
		Expect(client.outputLines()).To(ContainElement(ContainSubstring("PROVIDER_CONFIGURATION_CHANGED")))

		By("the SDK's evaluation details carry the FeatureFlag and the revision it evaluated")
		Expect(k8s.Get(ctx, crclient.ObjectKeyFromObject(ff), ff)).To(Succeed())
		rendered, err := flagsets.Render(ff)
		Expect(err).NotTo(HaveOccurred())
		// The in-process provider adds its own keys (providerID, scope).
		Eventually(flagMetadata(client)).Should(And(
			HaveKeyWithValue(flagsets.MetadataFlagSet, ns+"/checkout"),
			HaveKeyWithValue(flagsets.MetadataRevision, flagsets.Revision(rendered))))

		By("asking for a flag set of another namespace")
		refused := sdkClient(syncserver.Selector(key(foreign)), token, "new-checkout")
		Eventually(refused.running, 20*time.Second).Should(BeFalse())
		Expect(refused.outputLines()).To(ContainElement(And(ContainSubstring("init-failed"), ContainSubstring("PermissionDenied"))))
		Expect(evaluations(refused)()).To(BeEmpty())
	})
})
