package webhooks

import (
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/admissionfuzz"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
)

// extreme is one input at a limit of what the API server lets reach a
// webhook (a request body of 3 MiB, its JSON decoder's 10,000 levels),
// or of what flagplane judges (flagsets.MaxRuleDepth, MaxRuleValues), and
// what the webhook must answer.
type extreme struct {
	name    string
	object  func() string
	allowed bool
	// code is the refusal's HTTP code: 422 (invalid) or 400 (undecodable).
	code int32
	// says is what the answer (message or warnings) must say.
	says string
}

// unread is FeatureFlag shop/unread, which no source reads, with flagSpec
// (JSON) as its spec.flagSpec.
func unread(flagSpec string) string { return namedFlagSetJSON("unread", flagSpec) }

// ruleChain is a rule of n "!" operators: n+1 values, n levels deep.
func ruleChain(n int) string { return strings.Repeat(`{"!":`, n) + "true" + strings.Repeat("}", n) }

// okFlag is a boolean flag's JSON without its closing brace.
const okFlag = `{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on"`

// withRule is a boolean flag with the targeting rule.
func withRule(rule string) string { return okFlag + `,"targeting":` + rule + `}` }

// flagSetAtValues is a FeatureFlag of flags of the same rule, depth deep,
// whose values add up to values, in a flag set no source reads: no
// provider limits its size.
func flagSetAtValues(depth, values int) string {
	return unread(manyFlags(values/(depth+1), withRule(ruleChain(depth))))
}

// flagSetExtremes are the FeatureFlags at the limits.
func flagSetExtremes() []extreme {
	ok := okFlag
	atValues := flagSetAtValues
	// As many flags of body as fit a request, in a flag set no source reads.
	fill := func(body string) string {
		entry := len(`"f00000":`) + len(body) + 1
		return unread(manyFlags((admissionfuzz.MaxRequestBytes-200)/entry, body))
	}
	return []extreme{
		{name: "targeting 10,000 levels deep: beyond the JSON decoder's limit", code: 400, says: "exceeded max depth",
			object: func() string {
				return flagSetJSON(`{"flags":{"f":` + withRule(strings.Repeat(`{"and":[`, 5000)+"true"+strings.Repeat("]}", 5000)) + `}}`)
			}},
		{name: "targeting 9,980 levels deep", code: 422, says: "nests 9980 levels deep",
			object: func() string {
				return flagSetJSON(`{"flags":{"f":` + withRule(strings.Repeat(`{"and":[`, 4990)+"true"+strings.Repeat("]}", 4990)) + `}}`)
			}},
		{name: "$evaluators 9,990 levels deep", allowed: true, says: "nests 9990 levels deep",
			object: func() string {
				return flagSetJSON(`{"flags":{"f":` + ok + `}},"$evaluators":{"deep":` + ruleChain(9990) + `}}`)
			}},
		{name: "rules of MaxRuleValues values, 64 levels deep", allowed: true, says: "no FeatureFlagSource uses this flag set",
			object: func() string { return atValues(flagsets.MaxRuleDepth, flagsets.MaxRuleValues) }},
		{name: "rules of MaxRuleValues values, 2 levels deep", allowed: true, says: "no FeatureFlagSource uses this flag set",
			object: func() string { return atValues(2, flagsets.MaxRuleValues) }},
		{name: "rules of one value more than MaxRuleValues", code: 422, says: "more than the 50000 flagplane judges",
			object: func() string {
				return flagSetJSON(`{"flags":{"f":` + withRule(`{"and":[`+strings.TrimSuffix(strings.Repeat("1,", flagsets.MaxRuleValues-1), ",")+`]}`) + `}}`)
			}},
		{name: "3 MiB of rules", code: 422, says: "more than the 50000 flagplane judges",
			object: func() string { return fill(withRule(ruleChain(8))) }},
		{name: "a variant of 512 KiB, read by file, kubernetes and flagd-proxy sources", allowed: true, says: "reaches 1 namespace",
			object: func() string {
				return flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":{"on":"` + strings.Repeat("x", 512<<10) + `","off":"y"},"defaultVariant":"off"}}}`)
			}},
		{name: "variants of 512 KiB that are an array", code: 422, says: "must be a JSON object of variant name to value",
			object: func() string {
				return flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":["` + strings.Repeat("x", 512<<10) + `"],"defaultVariant":"on"}}}`)
			}},
		{name: "a flag key of 1 MiB, read by a file source", code: 422, says: "the file provider cannot deliver it",
			object: func() string { return flagSetJSON(`{"flags":{"` + strings.Repeat("k", 1<<20) + `":` + ok + `}}}`) }},
		{name: "3 MiB of flags, read by a file source", code: 422, says: "the file provider cannot deliver it",
			object: func() string {
				entry := len(`"f00000":`) + len(ok) + 2
				return flagSetJSON(manyFlags((admissionfuzz.MaxRequestBytes-200)/entry, ok+"}"))
			}},
		{name: "3 MiB of flags", allowed: true, says: "no FeatureFlagSource uses this flag set", object: func() string { return fill(ok + "}") }},
		{name: "3 MiB of flags, each invalid", code: 422, says: "errors in all, the first 20 above",
			object: func() string { return fill(`{"state":"ENABLED","variants":{"a":1,"b":"x"},"defaultVariant":"c"}`) }},
		{name: "3 MiB of flags, each with a warning", allowed: true, says: "more warnings",
			object: func() string { return fill(`{"state":"ENABLED","variants":{"a":1,"b":2},"defaultVariant":""}`) }},
		{name: "3 MiB of flags, each with a warning and a schema error", code: 422, says: "errors in all, the first 20 above",
			object: func() string {
				return fill(`{"state":"ENABLED","variants":{"a":1,"b":2},"defaultVariant":"","metadata":[1]}`)
			}},
		{name: "60,000 variants, and a fractional rule over 16,000 of them", allowed: true, says: "can never be served",
			object: func() string {
				var variants, buckets []string
				for i := range 60000 {
					variants = append(variants, fmt.Sprintf(`"v%d":%d`, i, i))
				}
				for i := range 16000 {
					buckets = append(buckets, fmt.Sprintf(`["v%d",1]`, i))
				}
				return unread(`{"flags":{"f":{"state":"ENABLED","variants":{` + strings.Join(variants, ",") +
					`},"defaultVariant":"v0","targeting":{"fractional":[` + strings.Join(buckets, ",") + `]}}}}`)
			}},
		{name: "the same flag key 35,000 times", allowed: true, says: "reaches 1 namespace",
			object: func() string {
				return flagSetJSON(`{"flags":{` + strings.TrimSuffix(strings.Repeat(`"f":`+ok+`},`, 35000), ",") + `}}`)
			}},
		{name: "odd Unicode in every key, name and rule", code: 422, says: `\u202e`,
			object: func() string {
				var flags []string
				for i, s := range oddStrings {
					q := jsonString(s)
					flags = append(flags, fmt.Sprintf(`%s:{"state":"ENABLED","variants":{%s:"a","x%d":"b"},"defaultVariant":%s,"targeting":{"if":[{"in":[%s,{"var":%s}]},%s,{"$ref":%s}]}}`,
						jsonString(fmt.Sprintf("%d%s", i, s)), q, i, jsonString(s+"?"), q, q, q, q))
				}
				return flagSetJSON(`{"flags":{` + strings.Join(flags, ",") + `}}`)
			}},
	}
}

// sourceExtremes are the FeatureFlagSources at the limits.
func sourceExtremes() []extreme {
	entries := func(n int, entry string) string {
		return strings.TrimSuffix(strings.Repeat(entry+",", n), ",")
	}
	return []extreme{
		{name: "256 entries (the CRD's most), each with every setting its provider ignores", allowed: true, says: "and 1771 more warnings",
			object: func() string {
				return sourceJSON(`{"sources":[` + entries(256, `{"source":"flags","tls":true,"certPath":"/c","providerID":"p","selector":"s","interval":5,"httpSyncBearerToken":"t"}`) + `]}`)
			}},
		{name: "256 entries of 1 MiB of sources in all, each invalid", code: 422, says: "256 errors in all, the first 20 above",
			object: func() string {
				return sourceJSON(`{"sources":[` + entries(256, `{"source":"`+strings.Repeat("x", 4<<10)+`","provider":"http"}`) + `]}`)
			}},
		{name: "50,000 header mappings, each of an invalid header", code: 422, says: "errors in all, the first 20 above",
			object: func() string {
				var m []string
				for i := range 50000 {
					m = append(m, fmt.Sprintf(`"X %d":""`, i))
				}
				return sourceJSON(`{"sources":[{"source":"flags"}],"headerToContextMappings":{` + strings.Join(m, ",") + `}}`)
			}},
		{name: "a selector of 20,000 expressions", code: 422, says: "spec.selector",
			object: func() string {
				return sourceJSON(`{"sources":[{"source":"flags"}],"selector":{"matchExpressions":[` + entries(20000, `{"key":"k","operator":"In","values":["a","b"]},{"key":"k","operator":"Bogus"}`) + `]}}`)
			}},
		{name: "ports out of range", code: 422, says: "spec.ofrepPort",
			object: func() string {
				return sourceJSON(`{"sources":[{"source":"flags"}],"port":-2147483648,"managementPort":0,"ofrepPort":8015}`)
			}},
		{name: "64 targetRefs, all the same", allowed: true, says: "reaches 1 namespace",
			object: func() string {
				return sourceJSON(`{"sources":[{"source":"flags"}],"targetRefs":[` + entries(64, `{"group":"apps","kind":"Deployment","name":"api"}`) + `]}`)
			}},
	}
}

// podExtremes are the pods at the limits.
func podExtremes() []extreme {
	owner := `"ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","controller":true}]`
	return []extreme{
		{name: "an annotation of 256 KiB naming 12,000 sources", allowed: true, says: "injected for",
			object: func() string {
				refs := strings.TrimSuffix(strings.Repeat("web,shop/api,other/x,missing-source,", 3000), ",")
				return `{"metadata":{` + owner + `,"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":"` + refs + `"}}}`
			}},
		{name: "a pod of 1.2 MiB: 10,000 containers", allowed: true, says: "flagd sidecar not injected: the pod would be",
			object: func() string {
				c := strings.TrimSuffix(strings.Repeat(`{"name":"c","image":"app","ports":[{"containerPort":8013},{"containerPort":8014}],"env":[{"name":"FLAGD_PORT","value":"1"}]},`, 10000), ",")
				return `{"metadata":{` + owner + `},"spec":{"containers":[` + c + `]}}`
			}},
	}
}

// rolloutPolicyExtremes are the FeatureFlagRolloutPolicies at the limits
// of the schema (16 steps, a gate of each type, a query of 4096
// characters) and of a request, with selectors as large as fit: the
// schema bounds neither their labels nor their expressions.
func rolloutPolicyExtremes() []extreme {
	target := `"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"}`
	policy := func(rest string) string { return rolloutPolicyJSON(`{` + target + `,` + rest + `}`) }
	// 16 steps of namespace selectors of as many expressions of op as fit
	// a request.
	steps16 := func(op string) string {
		expr := `{"key":"k00000","operator":"` + op + `","values":["a","b"]}`
		n := (admissionfuzz.MaxRequestBytes - 1024) / 16 / (len(expr) + 1)
		var steps []string
		for s := range 16 {
			exprs := make([]string, n)
			for i := range exprs {
				exprs[i] = fmt.Sprintf(`{"key":"k%05d","operator":"%s","values":["a","b"]}`, (s*n+i)%100000, op)
			}
			steps = append(steps, `{"namespaceSelector":{"matchExpressions":[`+strings.Join(exprs, ",")+`]}}`)
		}
		return policy(`"steps":[` + strings.Join(steps, ",") + `]`)
	}
	gates := func(query string) string {
		return `"gates":[{"type":"PodsReady","for":"1m"},{"type":"Restarts","max":3},{"type":"EvaluationErrors"},` +
			`{"type":"Prometheus","prometheus":{"address":"http://prometheus.monitoring.svc:9090","query":` + jsonString(query) + `}}]`
	}
	return []extreme{
		{name: "16 steps of selectors of 3 MiB of expressions, each selecting the consumer", allowed: true, says: "provider kubernetes",
			object: func() string { return steps16("NotIn") }},
		{name: "16 steps of selectors of 3 MiB of expressions, none selecting the consumer", code: 422, says: "selects none of the namespaces of FeatureFlag flags's consumers",
			object: func() string { return steps16("In") }},
		{name: "a selector of 20,000 expressions, the last of which does not parse", code: 422, says: "spec.steps[0].namespaceSelector",
			object: func() string {
				exprs := strings.Repeat(`{"key":"stage","operator":"Exists"},`, 19999) + `{"key":"stage","operator":"Bogus"}`
				return policy(`"steps":[{"namespaceSelector":{"matchExpressions":[` + exprs + `]}}]`)
			}},
		{name: "a label value of 1 MiB", code: 422, says: "must be no more than 63 bytes",
			object: func() string {
				return policy(`"steps":[{"workloadSelector":{"matchLabels":{"tier":"` + strings.Repeat("w", 1<<20) + `"}}}]`)
			}},
		{name: "a gate of each type, a Prometheus query of 4,096 characters", allowed: true, says: "provider kubernetes",
			object: func() string {
				q := `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace=~"$namespaces"})`
				for len(q)+len(` + rate(x[5m])`) <= 4096 {
					q += ` + rate(x[5m])`
				}
				return policy(`"steps":[{"percentage":100}],` + gates(q))
			}},
		{name: "a Prometheus query of 4,096 characters nested 2,047 deep", allowed: true, says: "provider kubernetes",
			object: func() string {
				return policy(`"steps":[{"percentage":100}],` + gates(strings.Repeat("(", 2047)+"1"+strings.Repeat(")", 2047)))
			}},
		{name: "a Prometheus query of 4,096 characters that does not parse", code: 422, says: "spec.gates[3].prometheus.query",
			object: func() string { return policy(`"steps":[{"percentage":100}],` + gates(strings.Repeat("x{", 2048))) }},
		{name: "odd Unicode in every name, label and query", code: 422, says: `\u202e`,
			object: func() string {
				var steps []string
				for _, s := range oddStrings[:8] {
					q := jsonString(s)
					steps = append(steps, `{"name":`+q+`,"namespaceSelector":{"matchLabels":{`+q+`:`+q+`}}}`)
				}
				q := jsonString("\u202e" + strings.Join(oddStrings[:8], ""))
				return rolloutPolicyJSON(`{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":` + q + `},"steps":[` + strings.Join(steps, ",") + `],` +
					`"gates":[{"type":"Prometheus","prometheus":{"address":"http://p:9090","query":` + q + `}}]}`)
			}},
	}
}

// TestAdmissionExtremes: every webhook answers the inputs at the limits in
// time, clearly, and as it should; the longest answer of each is logged
// with its input.
func TestAdmissionExtremes(t *testing.T) {
	reportTimings(t)
	validator := flagSetValidators(t)[0]
	sources := &SourceValidator{Graph: validator.Graph, Injection: injection.DefaultOptions()}
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	pods := newMutator(t, reader, &recordingEnsurer{})
	pods.Graph = newGraph(t, graphManifests+"\n---\n"+fuzzManifests)
	pods.WorkloadWait = 0
	policies := rolloutPolicyValidators(t)[1]
	for _, set := range []struct {
		path     string
		h        admission.Handler
		kind     string
		extremes []extreme
	}{
		{"FeatureFlag", validator, v1beta1.FeatureFlagKind, flagSetExtremes()},
		{"FeatureFlagSource", sources, v1beta1.FeatureFlagSourceKind, sourceExtremes()},
		{"Pod", pods, "Pod", podExtremes()},
		{"FeatureFlagRolloutPolicy", policies, deliveryv1alpha1.FeatureFlagRolloutPolicyKind, rolloutPolicyExtremes()},
	} {
		for _, x := range set.extremes {
			t.Run(set.path+"/"+x.name, func(t *testing.T) {
				obj := x.object()
				if admissionfuzz.RaceDetector && len(obj) > 256<<10 {
					t.Skipf("%d bytes: too slow under the race detector; make fuzz-short runs it without", len(obj))
				}
				req := fuzzRequest(set.kind, obj, "", false)
				switch set.kind {
				case "Pod":
					req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
					req.Object = runtime.RawExtension{Raw: []byte(obj)}
				case deliveryv1alpha1.FeatureFlagRolloutPolicyKind:
					req = rolloutPolicyRequest(obj, "", false)
				}
				req.Operation = admissionv1.Create
				resp := judge(t, set.path, set.h, req, fmt.Sprintf("%s (%d bytes)", x.name, len(obj)))
				if len(obj) > admissionfuzz.MaxRequestBytes {
					t.Errorf("%d bytes: more than the API server lets through", len(obj))
				}
				said := strings.Join(resp.Warnings, "\n")
				if resp.Result != nil {
					said = resp.Result.Message + "\n" + said
				}
				if resp.Allowed != x.allowed || (!x.allowed && resp.Result.Code != x.code) {
					t.Errorf("allowed %v (%d), want %v (%d): %.500s", resp.Allowed, resp.Result.Code, x.allowed, x.code, said)
				}
				if !strings.Contains(said, x.says) {
					t.Errorf("the answer does not say %q: %.1000s", x.says, said)
				}
			})
		}
	}
}
