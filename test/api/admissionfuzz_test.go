package api

import (
	"fmt"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flagplane/flagplane/test/admissionfuzz"
)

// warningsOf collects the warnings the API server answers with.
type warningsOf struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningsOf) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// The extremes that the fuzz tests of test/admissionfuzz feed the API
// server's admission of flagplane's CRDs in process (CRD.Create) are
// admitted and refused by a real API server the same way: the same
// verdict, a refusal of the same kind naming the same fields, the same
// warnings of duplicate fields. Each is a server-side dry run of the raw
// body.
var _ = Describe("The API server's admission that test/admissionfuzz runs in process", func() {
	var (
		ns     string
		crds   map[string]*admissionfuzz.CRD
		client rest.Interface
		warned *warningsOf
	)
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx, "crdfuzz")
		var err error
		crds, err = admissionfuzz.LoadCRDs("../../config/crd/bases")
		Expect(err).NotTo(HaveOccurred())
		warned = &warningsOf{}
		config := rest.CopyConfig(cp.Config)
		config.WarningHandler = warned
		cs, err := kubernetes.NewForConfig(config)
		Expect(err).NotTo(HaveOccurred())
		client = cs.CoreV1().RESTClient()
	})

	DescribeTable("admits and refuses the extremes as it does in process",
		func(ctx SpecContext, kind string, object func(ns string) string) {
			c := crds[kind]
			raw := []byte(object(ns))
			want := c.Create(ctx, ns, raw)

			By(fmt.Sprintf("in process: admitted %v, undecodable: %v, invalid: %.300v, warnings: %.300q",
				want.Admitted(), want.Undecodable, want.Invalid.ToAggregate(), want.Warnings))
			err := client.Post().AbsPath("/apis", c.GVK.Group, c.GVK.Version, "namespaces", ns, c.Resource).
				Param("dryRun", "All").SetHeader("Content-Type", "application/json").Body(raw).Do(ctx).Error()
			switch {
			case want.Admitted():
				Expect(err).NotTo(HaveOccurred(), "admitted in process")
				for _, w := range want.Warnings {
					Expect(warned.warnings).To(ContainElement(ContainSubstring(strings.TrimPrefix(w, "json: "))))
				}
			case want.Undecodable != nil:
				code := int32(0)
				if status, ok := err.(apierrors.APIStatus); ok {
					code = status.Status().Code
				}
				Expect(code).To(BeElementOf(int32(400), int32(413)),
					"refused as undecodable in process (%v); the API server: %v", want.Undecodable, err)
			default:
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "refused as invalid in process (%v); the API server: %v", want.Invalid.ToAggregate(), err)
				for _, e := range want.Invalid {
					if e.Field != "<nil>" {
						Expect(err.Error()).To(ContainSubstring(e.Field))
					}
				}
				Expect(err.Error()).To(ContainSubstring(want.Invalid[0].Detail))
			}
		},
		Entry("a Flagd setting a label flagplane sets (a CEL rule)", "Flagd", flagd(`{"featureFlagSource":"web","labels":{"app":"x"}}`)),
		Entry("a Flagd of 5,000 labels, one of them reserved (the CEL rule's cost at run time)", "Flagd", func(ns string) string {
			var labels []string
			for i := range 5000 {
				labels = append(labels, fmt.Sprintf(`"l%d":"v"`, i))
			}
			return flagd(`{"featureFlagSource":"web","labels":{` + strings.Join(labels, ",") + `,"app.kubernetes.io/version":"x"}}`)(ns)
		}),
		Entry("a Flagd of 10^10 replicas, of type string", "Flagd", flagd(`{"featureFlagSource":"web","replicas":1e10,"serviceType":"Headless"}`)),
		Entry("a Flagd with label keys of RTL marks, NUL and emoji", "Flagd", flagd(`{"featureFlagSource":"web","labels":{"\u200fx":"y","a\u0000b":"c","\ud83d\udea9":"d"}}`)),
		Entry("a Flagd with duplicate fields", "Flagd", func(ns string) string {
			return `{"apiVersion":"core.openfeature.dev/v1beta1","kind":"Flagd","metadata":{"name":"dup","namespace":"` + ns +
				`"},"spec":{"featureFlagSource":"web","featureFlagSource":"api","replicas":1,"replicas":2}}`
		}),
		Entry("a FeatureFlagSourcePolicy of another group's target", "FeatureFlagSourcePolicy",
			policy(`{"targetRef":{"group":"apps","kind":"Deployment","name":"web"},"defaults":{"port":0}}`)),
		Entry("a FeatureFlagSourcePolicy with the same env var twice (a list map)", "FeatureFlagSourcePolicy",
			policy(`{"targetRef":{"group":"","kind":"Namespace","name":"NS"},"overrides":{"envVars":[{"name":"A","value":"1"},{"name":"A","value":"2"}]}}`)),
		Entry("a FeatureFlagSourcePolicy with an env var prefix no env var name can start with (admitted)", "FeatureFlagSourcePolicy",
			policy(`{"targetRef":{"group":"","kind":"Namespace","name":"NS"},"overrides":{"envVarPrefix":"1-bad prefix"}}`)),
		Entry("a FeatureFlagSourcePolicy with neither defaults nor overrides (a CEL rule)", "FeatureFlagSourcePolicy",
			policy(`{"targetRef":{"group":"","kind":"Namespace","name":"NS"},"defaults":null}`)),
		Entry("a FeatureFlagSource naming one workload 64 times (the CEL rule at its most)", "FeatureFlagSource", func(ns string) string {
			return source(`{"sources":[{"source":"flags"}],"targetRefs":[` + strings.TrimSuffix(strings.Repeat(`{"group":"apps","kind":"Deployment","name":"web"},`, 64), ",") + `]}`)(ns)
		}),
		Entry("a FeatureFlagSource of 65 targetRefs (maxItems: the CEL rules are skipped)", "FeatureFlagSource", func(ns string) string {
			var refs []string
			for i := range 65 {
				refs = append(refs, fmt.Sprintf(`{"group":"","kind":"Pod","name":"w%d"}`, i))
			}
			return source(`{"sources":[{"source":"flags"}],"targetRefs":[` + strings.Join(refs, ",") + `]}`)(ns)
		}),
		Entry("a FeatureFlagSource with targetRefs and a selector, and a port of -1", "FeatureFlagSource",
			source(`{"sources":[{"source":"flags"}],"targetRefs":[{"kind":"Deployment","name":"web"}],"selector":{},"port":-1}`)),
		Entry("a FeatureFlagRolloutPolicy whose pause Go cannot read (the duration rule)", "FeatureFlagRolloutPolicy",
			rolloutPolicy(`"steps":[{"percentage":50,"pause":"1d"}]`)),
		Entry("a FeatureFlagRolloutPolicy whose gate waits a negative for", "FeatureFlagRolloutPolicy",
			rolloutPolicy(`"steps":[{"percentage":100}],"gates":[{"type":"PodsReady","for":"-5m"}]`)),
		Entry("a FeatureFlagRolloutPolicy of a pause of 2,562,047 hours (the longest Go reads)", "FeatureFlagRolloutPolicy",
			rolloutPolicy(`"steps":[{"percentage":50,"pause":"2562047h"}]`)),
		Entry("a FeatureFlagRolloutPolicy of two gates of one type (a list map)", "FeatureFlagRolloutPolicy",
			rolloutPolicy(`"steps":[{"percentage":100}],"gates":[{"type":"Restarts","max":1},{"type":"Restarts","max":2}]`)),
		Entry("a FeatureFlagRolloutPolicy of a step with two selectors (a CEL rule)", "FeatureFlagRolloutPolicy",
			rolloutPolicy(`"steps":[{"percentage":50,"namespaceSelector":{}}]`)),
		Entry("a FeatureFlag whose targeting nests 9,980 levels (admitted: the webhook refuses it)", "FeatureFlag", func(ns string) string {
			return flagSet(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true},"defaultVariant":"on","targeting":` +
				strings.Repeat(`{"and":[`, 4990) + "true" + strings.Repeat("]}", 4990) + `}}}`)(ns)
		}),
		Entry("a FeatureFlag whose targeting nests 10,000 levels (beyond the JSON decoder's limit)", "FeatureFlag", func(ns string) string {
			return flagSet(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true},"defaultVariant":"on","targeting":` +
				strings.Repeat(`{"and":[`, 5000) + "true" + strings.Repeat("]}", 5000) + `}}}`)(ns)
		}),
		Entry("a FeatureFlag of one byte more than the API server reads", "FeatureFlag", func(ns string) string {
			obj := flagSet(`{"flags":{"f":{"state":"ENABLED","variants":{"on":"PAD"},"defaultVariant":"on"}}}`)(ns)
			return strings.Replace(obj, "PAD", strings.Repeat("x", admissionfuzz.MaxRequestBytes+1-len(obj)+len("PAD")), 1)
		}),
	)
})

// flagd, policy, source and flagSet make an object of their kind with spec
// (JSON) in a namespace; "NS" in spec is that namespace.
func flagd(spec string) func(string) string {
	return objectIn("core.openfeature.dev/v1beta1", "Flagd", spec)
}

func policy(spec string) func(string) string {
	return objectIn("policy.flagplane.dev/v1alpha1", "FeatureFlagSourcePolicy", spec)
}

func source(spec string) func(string) string {
	return objectIn("core.openfeature.dev/v1beta1", "FeatureFlagSource", spec)
}

// rolloutPolicy is a FeatureFlagRolloutPolicy of FeatureFlag flags with the
// rest of its spec (JSON fields after targetRef).
func rolloutPolicy(rest string) func(string) string {
	return objectIn("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy",
		`{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"},`+rest+`}`)
}

func flagSet(spec string) func(string) string {
	return objectIn("core.openfeature.dev/v1beta1", "FeatureFlag", `{"flagSpec":`+spec+`}`)
}

func objectIn(apiVersion, kind, spec string) func(string) string {
	return func(ns string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","metadata":{"name":"extreme","namespace":"` + ns + `"},"spec":` +
			strings.ReplaceAll(spec, `"NS"`, `"`+ns+`"`) + `}`
	}
}
