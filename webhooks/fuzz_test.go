package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/admissionfuzz"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The fuzz tests of admission. Each webhook is fed the raw bytes of an
// AdmissionRequest's object (and, on update, of the old one) as the
// server serves it (loggedDecisions around the handler), judged against a
// built graph (fuzzManifests), so that the blast radius and every warning
// run too. Whatever the bytes, it never panics, answers within the
// webhook timeout (admissionfuzz.Timeout), and answers clearly
// (admissionfuzz.Response: a refusal says which field and why, messages
// and warnings are bounded and carry no control or bidirectional
// formatting character). The longest answer of each webhook is logged,
// and recorded for make fuzz (admissionfuzz.Timings).
//
// The seeds reach the extremes that fit a fuzzer's mutations: odd Unicode
// (RTL marks, NUL, invalid UTF-8, combining characters, emoji) in keys,
// names and rules, rules nested to the JSON decoder's limit, variants of
// hundreds of KiB, thousands of flags, out-of-range ports, duplicate
// entries, nulls and wrong types. TestAdmissionExtremes
// (extremes_test.go) runs the larger inputs the API server still lets
// through, each by name.

// admissionTimings are the longest answers of this process's admissions.
var admissionTimings admissionfuzz.Timings

// fuzzManifests is the cluster the fuzzed webhooks judge against: namespace
// shop of blastManifests (flag set shop/flags, read by a file source that
// selects two Deployments and a kubernetes source that targets a third),
// with a flagd-proxy source, a Flagd serving it and a
// FeatureFlagSourcePolicy; and namespace ns0 of the benchmarks' cluster
// (a flag set, two sources, 100 Deployments).
var fuzzManifests = blastManifests + `
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: proxy}
spec:
  sources: [{source: flags, provider: flagd-proxy}]
  targetRefs: [{group: apps, kind: Deployment, name: worker}]
---
apiVersion: core.openfeature.dev/v1beta1
kind: Flagd
metadata: {namespace: shop, name: shop-flagd}
spec: {featureFlagSource: web}
---
apiVersion: policy.flagplane.dev/v1alpha1
kind: FeatureFlagSourcePolicy
metadata: {namespace: shop, name: platform}
spec:
  targetRef: {group: "", kind: Namespace, name: shop}
  defaults: {logFormat: console, envVars: [{name: OTEL_EXPORTER_OTLP_PROTOCOL, value: grpc}]}
  overrides: {strategy: atomic, debugLogging: false}
` + blastWorkload("worker", "worker") + "\n" + clusterManifests(100)

// discardDecisions is a context whose logger formats every decision, as
// the manager's at --zap-log-level=debug does, and drops it.
func discardDecisions() context.Context {
	return log.IntoContext(context.Background(), funcr.New(func(_, _ string) {}, funcr.Options{Verbosity: 1}))
}

// fuzzRequest is the AdmissionRequest of kind in namespace shop: a create
// of object, or an update from old to object.
func fuzzRequest(kind, object, old string, update bool) admission.Request {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "fuzz", Operation: admissionv1.Create, Namespace: "shop",
		Kind:   metav1.GroupVersionKind{Group: v1beta1.GroupVersion.Group, Version: v1beta1.GroupVersion.Version, Kind: kind},
		Object: runtime.RawExtension{Raw: []byte(object)},
	}}
	if update {
		req.Operation = admissionv1.Update
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	return req
}

// judge runs one admission of h, times it under path and checks the
// answer.
func judge(t testing.TB, path string, h admission.Handler, req admission.Request, input string) admission.Response {
	t.Helper()
	var resp admission.Response
	served := loggedDecisions{h}
	d := admissionTimings.Time(path, input, func() { resp = served.Handle(discardDecisions(), req) })
	if d.Over() && !admissionfuzz.RaceDetector {
		t.Errorf("%s answered in %v, more CPU time than the webhook timeout %v: %s", path, d, admissionfuzz.Timeout, input)
	}
	if err := admissionfuzz.Response(resp.AdmissionResponse); err != nil {
		t.Errorf("%s: an unclear answer: %v\ninput: %s", path, err, input)
	}
	return resp
}

// reportTimings logs the longest admission of the run when tb ends.
func reportTimings(tb testing.TB) {
	tb.Cleanup(func() { tb.Log("\n" + admissionTimings.Report()) })
}

// flagSetValidators are the FeatureFlag webhook as the manager runs it by
// default, with --strict-validation, and with --flags-validation=false.
func flagSetValidators(tb testing.TB) []*FlagSetValidator {
	graph := newGraph(tb, fuzzManifests)
	flagd := Options{Injection: injection.DefaultOptions()}.Flagd()
	return []*FlagSetValidator{
		{Graph: graph, Flagd: flagd},
		{Strict: true, Graph: graph, Flagd: flagd},
		{Disabled: true, Graph: graph, Flagd: flagd},
	}
}

// FuzzFlagSetValidator: whatever a FeatureFlag create or update carries,
// the FeatureFlag webhook, strict, lenient or off, answers in time and
// clearly.
func FuzzFlagSetValidator(f *testing.F) {
	for _, s := range flagSetSeeds() {
		f.Add(s, flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"off"}}}`), false, uint8(0))
	}
	for _, s := range flagSetSeeds()[:8] {
		f.Add(s, flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"off"}}}`), true, uint8(1))
		f.Add(s, s, true, uint8(2))
	}
	validators := flagSetValidators(f)
	reportTimings(f)
	f.Fuzz(func(t *testing.T, object, old string, update bool, mode uint8) {
		v := validators[int(mode)%len(validators)]
		judge(t, "FeatureFlag", v, fuzzRequest(v1beta1.FeatureFlagKind, object, old, update), admissionfuzz.Describe(t.Name(), []byte(object)))
	})
}

// FuzzSourceValidator: whatever a FeatureFlagSource create or update
// carries, the FeatureFlagSource webhook answers in time and clearly.
func FuzzSourceValidator(f *testing.F) {
	web := sourceJSON(`{"sources":[{"source":"flags","provider":"file"}],"selector":{"matchLabels":{"tier":"web"}},"rolloutOnChange":true}`)
	for _, s := range sourceSeeds() {
		f.Add(s, web, false)
		f.Add(s, web, true)
	}
	v := &SourceValidator{Graph: newGraph(f, fuzzManifests), Injection: injection.DefaultOptions()}
	reportTimings(f)
	f.Fuzz(func(t *testing.T, object, old string, update bool) {
		judge(t, "FeatureFlagSource", v, fuzzRequest(v1beta1.FeatureFlagSourceKind, object, old, update), admissionfuzz.Describe(t.Name(), []byte(object)))
	})
}

// FuzzPodMutator: whatever a pod create carries, the webhook answers in
// time and clearly, and allows it: it must never block a pod (a pod it
// cannot decode is the one refusal, with a 400).
func FuzzPodMutator(f *testing.F) {
	seed, _ := json.Marshal(podOwnedBy("StatefulSet", "db", nil))
	f.Add(string(seed), false)
	for _, s := range podSeeds() {
		f.Add(s, false)
		f.Add(s, true)
	}
	reader := fake.NewClientBuilder().WithScheme(testScheme(f)).WithObjects(replicaSetMeta("shop", "web-5d4f8", "web")).Build()
	m := newMutator(f, reader, &recordingEnsurer{})
	m.Graph = newGraph(f, graphManifests+"\n---\n"+fuzzManifests)
	m.WorkloadWait = 0
	reportTimings(f)
	f.Fuzz(func(t *testing.T, pod string, dryRun bool) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Create, Namespace: "shop", DryRun: ptr.To(dryRun),
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: []byte(pod)},
		}}
		resp := judge(t, "Pod", m, req, admissionfuzz.Describe(t.Name(), []byte(pod)))
		if !resp.Allowed && resp.Result.Code != 400 {
			t.Fatalf("a decodable pod was refused: %v", resp.Result)
		}
		// The patch applies to the pod as sent, and leaves every field it
		// need not change as sent: for a pod as the API server sends one,
		// an object with metadata and spec.
		var sent map[string]any
		if !resp.Allowed || len(resp.Patches) == 0 || json.Unmarshal([]byte(pod), &sent) != nil {
			return
		}
		if _, ok := sent["metadata"].(map[string]any); !ok {
			return
		}
		if _, ok := sent["spec"].(map[string]any); !ok {
			return
		}
		if got := untouched(applyPatch(t, []byte(pod), resp)); !reflect.DeepEqual(got, untouched(sent)) {
			t.Fatalf("the patch changed what the injection does not touch:\nsent    %v\npatched %v", untouched(sent), got)
		}
	})
}

// FuzzRolloutPolicyValidator: whatever a FeatureFlagRolloutPolicy create or
// update carries, the FeatureFlagRolloutPolicy webhook, with Prometheus
// gates off or on, answers in time and clearly.
func FuzzRolloutPolicyValidator(f *testing.F) {
	canary := rolloutPolicyJSON(`{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"},"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}}},{"percentage":100}]}`)
	for _, s := range rolloutPolicySeeds() {
		f.Add(s, canary, false, uint8(0))
		f.Add(s, canary, false, uint8(1))
	}
	for _, s := range rolloutPolicySeeds()[:8] {
		f.Add(s, canary, true, uint8(1))
		f.Add(s, s, true, uint8(0))
	}
	validators := rolloutPolicyValidators(f)
	reportTimings(f)
	f.Fuzz(func(t *testing.T, object, old string, update bool, mode uint8) {
		v := validators[int(mode)%len(validators)]
		judge(t, "FeatureFlagRolloutPolicy", v, rolloutPolicyRequest(object, old, update), admissionfuzz.Describe(t.Name(), []byte(object)))
	})
}

// FuzzValidateSourceSpec: the FeatureFlagSource rules never panic.
func FuzzValidateSourceSpec(f *testing.F) {
	f.Add(`{"metadata":{"name":"x","annotations":{"flagplane.core.openfeature.dev/sidecar-security-context":"{}"}},"spec":{"sources":[{"source":"a/b","provider":"kubernetes"}],"port":8015}}`)
	f.Add(`{"spec":{"sources":[{"source":"grpcs://:","provider":"grpc"},{"source":"gs://","provider":"gcs"},{"source":"http://[::1","provider":"http"}],"envVarPrefix":"1","headerToContextMappings":{"":""},"resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var src v1beta1.FeatureFlagSource
		if json.Unmarshal([]byte(doc), &src) != nil {
			return
		}
		_, _ = ValidateSourceSpec(&src, v1beta1.SyncProviderFile)
	})
}

// flagSetJSON is FeatureFlag shop/flags, which sources of fuzzManifests
// read, with flagSpec (JSON) as its spec.flagSpec.
func flagSetJSON(flagSpec string) string { return namedFlagSetJSON("flags", flagSpec) }

// namedFlagSetJSON is FeatureFlag shop/<name> with flagSpec (JSON) as its
// spec.flagSpec.
func namedFlagSetJSON(name, flagSpec string) string {
	return `{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"` + name + `"},"spec":{"flagSpec":` + flagSpec + `}}`
}

// sourceJSON is FeatureFlagSource shop/web with spec (JSON) as its spec.
func sourceJSON(spec string) string {
	return `{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"web"},"spec":` + spec + `}`
}

// jsonString quotes s for JSON as encoding/json does: NUL escaped,
// invalid UTF-8 replaced, as the API server sends it.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// oddStrings are keys and names a user should not write and flagplane
// must still answer clearly about.
var oddStrings = []string{
	"\u200fflag",                           // RTL mark
	"\u202eflag\u202c",                     // right-to-left override
	"fl\x00ag",                             // NUL
	"fl\xff\xfeag",                         // invalid UTF-8
	"e\u0301\u0301\u0301\u0301\u0301",      // combining accents
	"\U0001f6a9\U0001f468\u200d\U0001f469", // emoji, a ZWJ sequence
	"line\nbreak\x1b[31m",                  // newline, terminal escape
	"",
	strings.Repeat("k", 4096),
}

// flagSetSeeds are FeatureFlags (JSON) at the edges the FeatureFlag
// webhook must answer about.
func flagSetSeeds() []string {
	flag := func(key, body string) string { return `{"flags":{` + jsonString(key) + `:` + body + `}}` }
	ok := `{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on"}`
	seeds := []string{
		flagSetJSON(flag("f", ok)),
		flagSetJSON(flag("f", `{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"of"}`)),
		flagSetJSON(`{"flags":{"f":` + ok + `,"f":{"state":"DISABLED","variants":{"a":1},"defaultVariant":"a"}}}`), // a duplicate key
		flagSetJSON(`{"flags":null}`),
		flagSetJSON(`{"flags":{"f":null}}`),
		flagSetJSON(`{"flags":{"f":{"state":null,"variants":null,"defaultVariant":null,"targeting":null}}}`),
		flagSetJSON(`{"flags":[]}`),
		flagSetJSON(`{"flags":{"f":{"state":5,"variants":"on","defaultVariant":true}}}`),
		flagSetJSON(`{"flags":{},"$evaluators":[],"metadata":"x"}`),
		flagSetJSON(`null`),
		`{"metadata":{"name":5},"spec":"x"}`,
		`{"spec":null}`,
		`null`,
		``,
		`{"metadata":{"name":"flags","namespace":"ns0"},"spec":{"flagSpec":` + flag("f", ok) + `}}`,
	}
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			flagSetJSON(flag(s, ok)),
			flagSetJSON(`{"flags":{"`+s+`":`+ok+`}}`), // raw: control characters and invalid UTF-8 as they are
			flagSetJSON(flag("f", `{"state":"ENABLED","variants":{`+q+`:true,"off":false},"defaultVariant":`+q+`}`)),
			flagSetJSON(flag("f", `{"state":"ENABLED","variants":{`+q+`:"a","off":"b"},"defaultVariant":"off","targeting":{"if":[{"in":[`+q+`,{"var":`+q+`}]},`+q+`,"nope"]}}`)),
			flagSetJSON(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on","targeting":{"$ref":`+q+`}}},"$evaluators":{`+q+`:{"==":[1,2]},"x":{"$ref":`+q+`,"y":1}}}`),
		)
	}
	// Rules nested to the JSON decoder's limit (10000, the API server's
	// too), and beyond.
	for _, depth := range []int{200, 4990, 5000} {
		deep := strings.Repeat(`{"and":[`, depth) + "true" + strings.Repeat("]}", depth)
		seeds = append(seeds,
			flagSetJSON(flag("f", `{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on","targeting":`+deep+`}`)),
			flagSetJSON(`{"flags":{"f":`+ok+`},"$evaluators":{"deep":`+deep+`}}`))
	}
	ifs := strings.Repeat(`{"if":[true,`, 3000) + `"on"` + strings.Repeat(`,"off"]}`, 3000)
	seeds = append(seeds, flagSetJSON(flag("f", `{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on","targeting":`+ifs+`}`)))
	// Variants of hundreds of KiB: a value, a name, an array.
	big := strings.Repeat("x", 300<<10)
	seeds = append(seeds,
		flagSetJSON(flag("f", `{"state":"ENABLED","variants":{"on":"`+big+`","off":"y"},"defaultVariant":"on"}`)),
		flagSetJSON(flag("f", `{"state":"ENABLED","variants":{"`+big+`":1,"off":2},"defaultVariant":"nope"}`)),
		flagSetJSON(flag("f", `{"state":"ENABLED","variants":["`+big+`"],"defaultVariant":"on"}`)),
	)
	// Thousands of flags: valid, each invalid, each with a warning, each
	// with targeting.
	for _, body := range []string{
		ok,
		`{"state":"ENABLED","variants":{"a":1,"b":"x"},"defaultVariant":"c"}`,
		`{"state":"ENABLED","variants":{"a":1,"b":2},"defaultVariant":""}`,
		`{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"off","targeting":{"if":[{"in":["@example.com",{"var":"email"}]},"on","of"]}}`,
	} {
		seeds = append(seeds, flagSetJSON(manyFlags(2000, body)))
	}
	return seeds
}

// manyFlags is a flagSpec of n flags f0, f1, ... with body each.
func manyFlags(n int, body string) string {
	var b strings.Builder
	b.WriteString(`{"flags":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"f` + itoa(i) + `":` + body)
	}
	b.WriteString(`}}`)
	return b.String()
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// rolloutPolicySeeds are FeatureFlagRolloutPolicies (JSON) at the edges the
// FeatureFlagRolloutPolicy webhook must answer about: the schema's bounds
// (16 steps, 8 gates, a percentage of 0 to 100, a query of 4096
// characters) and past them, since the fuzzer sends what the schema would
// refuse too.
func rolloutPolicySeeds() []string {
	target := `"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"}`
	policy := func(rest string) string { return rolloutPolicyJSON(`{` + target + `,` + rest + `}`) }
	prometheus := func(query string) string {
		return `{"type":"Prometheus","max":0,"prometheus":{"address":"http://prometheus.monitoring.svc:9090","query":` + jsonString(query) + `}}`
	}
	longQuery := `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace=~"$namespaces"})`
	for len(longQuery)+len(` + rate(x[5m])`) <= 4096 {
		longQuery += ` + rate(x[5m])`
	}
	longQuery += strings.Repeat(" ", 4096-len(longQuery))
	seeds := []string{
		policy(`"steps":[{"percentage":50,"pause":"5m","approval":true},{"percentage":100}],"gates":[{"type":"PodsReady","for":"30s"},{"type":"Restarts","max":2},{"type":"EvaluationErrors","max":0}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}}},{"workloadSelector":{"matchLabels":{"tier":"web"}}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canery"}}},{"workloadSelector":{"matchLabels":{"tier":"wbe"}}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchExpressions":[{"key":"stage","operator":"Bogus"},{"key":"stage","operator":"In"},{"key":"stage","operator":"Exists","values":["x"]},{"key":"bad key!","operator":"DoesNotExist"}]}}]`),
		policy(`"steps":[{"workloadSelector":{"matchLabels":{"bad key!":"bad value!","":""}}}]`),
		policy(`"steps":[{"namespaceSelector":{}},{"workloadSelector":{}},{"percentage":0}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}},"workloadSelector":{"matchLabels":{"tier":"web"}},"percentage":5},{}]`),
		policy(`"steps":[{"percentage":-1},{"percentage":101},{"percentage":2147483647},{"percentage":-2147483648}]`),
		policy(`"steps":[{"percentage":1e10}]`),
		policy(`"steps":[{"percentage":"50"}]`),
		policy(`"steps":[{"percentage":50,"pause":"forever"}]`),
		policy(`"steps":[{"percentage":50,"pause":"-5m"}],"gates":[{"type":"PodsReady","for":"-1s"},{"type":"Restarts","max":-1}]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(longQuery) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(strings.Repeat("(", 2047)+"1"+strings.Repeat(")", 2048)) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(strings.Repeat("x{", 2048)) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(`sum(up{namespace="other-team"}) or vector(0)`) + `,` + prometheus(`info(up)`) + `,` + prometheus(``) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[{"type":"Prometheus"},{"type":"Restarts","prometheus":{"address":"ftp://x","query":"up"}},{"type":"Unknown"},{"type":""}]`),
		policy(`"steps":[{"percentage":100}],"gates":[{"type":"Prometheus","prometheus":null},{"type":null},null]`),
		policy(`"steps":null,"gates":null,"paused":null`),
		policy(`"steps":[null,{"namespaceSelector":null,"workloadSelector":null,"percentage":null}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":null,"matchExpressions":[null,{"key":null,"operator":null,"values":null}]}}]`),
		policy(`"steps":"all","gates":{},"paused":"yes"`),
		policy(`"steps":[]`),
		rolloutPolicyJSON(`{"targetRef":null,"steps":[{"percentage":100}]}`),
		rolloutPolicyJSON(`{"targetRef":{"group":"apps","kind":"Deployment","name":"web"},"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}}}]}`),
		rolloutPolicyJSON(`{"targetRef":{"name":"missing"},"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}}}]}`),
		rolloutPolicyJSON(`null`),
		`{"metadata":{"namespace":"ns0","name":"canary"},"spec":{` + target + `,"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}}}]}}`,
		`{"metadata":{"name":5},"spec":"x"}`,
		`null`,
		``,
	}
	// The most steps and gates of the schema, and more.
	var steps16, gates8 []string
	for i := range 16 {
		steps16 = append(steps16, fmt.Sprintf(`{"name":"step-%d","workloadSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["web","api","w%d"]}]},"pause":"1s","approval":true}`, i, i))
	}
	for _, g := range []string{`{"type":"PodsReady","for":"1m"}`, `{"type":"Restarts","max":9223372036854775807}`, `{"type":"EvaluationErrors","max":0}`, prometheus(longQuery)} {
		gates8 = append(gates8, g, g)
	}
	seeds = append(seeds,
		policy(`"steps":[`+strings.Join(steps16, ",")+`],"gates":[`+strings.Join(gates8, ",")+`]`),
		policy(`"steps":[`+strings.Join(append(steps16, steps16...), ",")+`]`),
	)
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			rolloutPolicyJSON(`{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":`+q+`},"steps":[{"name":`+q+`,"percentage":100}]}`),
			policy(`"steps":[{"name":`+q+`,"namespaceSelector":{"matchLabels":{`+q+`:`+q+`}}},{"workloadSelector":{"matchExpressions":[{"key":`+q+`,"operator":`+q+`,"values":[`+q+`]}]}}]`),
			policy(`"steps":[{"percentage":100}],"gates":[`+prometheus(`sum(x{l=`+q+`})`)+`,{"type":"Prometheus","prometheus":{"address":`+q+`,"query":`+q+`}}]`),
			`{"metadata":{"namespace":"shop","name":`+q+`},"spec":{`+target+`,"steps":[{"namespaceSelector":{"matchLabels":{"stage":"nowhere"}}}]}}`,
		)
	}
	// Huge selectors: thousands of labels and expressions, valid and not,
	// and values of hundreds of KiB.
	var labels, exprs, bad []string
	for i := range 5000 {
		labels = append(labels, fmt.Sprintf(`"l%d":"v%d"`, i, i))
		exprs = append(exprs, fmt.Sprintf(`{"key":"k%d","operator":"NotIn","values":["a","b"]}`, i))
		bad = append(bad, fmt.Sprintf(`{"key":"k%d","operator":"In"}`, i))
	}
	big := strings.Repeat("x", 300<<10)
	seeds = append(seeds,
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{`+strings.Join(labels, ",")+`}}}]`),
		policy(`"steps":[{"workloadSelector":{"matchExpressions":[`+strings.Join(exprs, ",")+`]}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchExpressions":[`+strings.Join(bad, ",")+`]}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"`+big+`"}}},{"workloadSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["`+big+`"]}]}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"`+big+`":"x"}}}]`),
	)
	return seeds
}

// sourceSeeds are FeatureFlagSources (JSON) at the edges the
// FeatureFlagSource webhook must answer about.
func sourceSeeds() []string {
	seeds := []string{
		sourceJSON(`{"sources":[{"source":"flags"}]}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"port":-1,"managementPort":0,"ofrepPort":65536}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"port":2147483647,"managementPort":-2147483648,"ofrepPort":8015}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"port":8013,"managementPort":8013,"ofrepPort":8013}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"port":1e10}`),
		sourceJSON(`{"sources":[{"source":"flags"},{"source":"flags"},{"source":"shop/flags","provider":"file"}]}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"api"},{"group":"apps","kind":"Deployment","name":"api"}]}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"api"}],"selector":{"matchLabels":{"tier":"web"}}}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"selector":{"matchExpressions":[{"key":"tier","operator":"Exists","values":["x"]},{"key":"","operator":"Bogus"}]}}`),
		sourceJSON(`{"sources":null,"targetRefs":null,"selector":null,"envVars":null,"resources":null}`),
		sourceJSON(`{"sources":[null,{"source":null,"provider":null}]}`),
		sourceJSON(`{"sources":"flags","port":"8013","debugLogging":"yes","envVars":{}}`),
		sourceJSON(`null`),
		`{"metadata":{"annotations":{"flagplane.core.openfeature.dev/sidecar-security-context":"{\"runAsUser\":-1,\"capabilities\":{\"add\":[\"ALL\"]}}"}},"spec":{"sources":[{"source":"flags"}]}}`,
		`{"metadata":{"annotations":{"flagplane.core.openfeature.dev/sidecar-security-context":"[[[[[[[["}},"spec":{"sources":[{"source":"flags"}]}}`,
		sourceJSON(`{"sources":[{"source":"https://flags.example/a.json","provider":"http","interval":-5,"httpSyncBearerToken":"t"},{"source":"grpcs://:0","provider":"grpc","tls":true},{"source":"dns:///x:65536","provider":"grpc"},{"source":"s3://b","provider":"s3"},{"source":"x","provider":"flagd-proxy"}]}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"envVarPrefix":"1X","envVars":[{"name":"A B","value":"x"},{"name":"A B","value":"y"}],"syncProviderArgs":["=x","y"],"cors":["",""],"logFormat":"text","evaluator":"lua","socketPath":"x.sock","otelCollectorUri":":4317"}`),
		sourceJSON(`{"sources":[{"source":"flags"}],"resources":{"requests":{"cpu":"2","memory":"1Ei"},"limits":{"cpu":"1","memory":"1"}}}`),
	}
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			sourceJSON(`{"sources":[{"source":`+q+`},{"source":`+q+`,"provider":"http"},{"source":`+q+`,"provider":"grpc"}]}`),
			sourceJSON(`{"sources":[{"source":"flags"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":`+q+`}],"envVarPrefix":`+q+`}`),
			sourceJSON(`{"sources":[{"source":"flags"}],"headerToContextMappings":{`+q+`:`+q+`},"contextValues":{`+q+`:`+q+`},"envVars":[{"name":`+q+`}],"syncProviderArgs":[`+q+`]}`),
			`{"metadata":{"name":`+q+`,"annotations":{"flagplane.core.openfeature.dev/sidecar-security-context":`+q+`}},"spec":{"sources":[{"source":"flags"}]}}`,
		)
	}
	// The CRD's most entries, each with every setting its provider ignores.
	var many []string
	for range 256 {
		many = append(many, `{"source":"flags","tls":true,"certPath":"/c","providerID":"p","selector":"s","interval":5,"httpSyncBearerToken":"t"}`)
	}
	seeds = append(seeds, sourceJSON(`{"sources":[`+strings.Join(many, ",")+`]}`))
	return seeds
}

// podSeeds are pods (JSON) at the edges the Pod webhook must answer about.
func podSeeds() []string {
	seeds := []string{
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-5d4f8","controller":true}],"labels":{"pod-template-hash":"5d4f8"}}}`,
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","controller":true}],"labels":{"pod-template-hash":"1"}}}`,
		`{"metadata":{"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":"a,/,b/c/d"}},"spec":{"containers":[{"name":"flagd"}]}}`,
		`{"spec":{"initContainers":[{"name":"flagd"}],"volumes":[{"name":"x"}]}}`,
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"agent","controller":true},{"apiVersion":"apps/v1","kind":"DaemonSet","name":"agent","controller":true}]}}`,
		`{"metadata":{"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"j","controller":true}],"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":"web,web,shop/web","openfeature.dev/inprocessconfiguration":"x,,"}}}`,
		`{"metadata":null,"spec":null}`,
		`{"metadata":{"annotations":null,"ownerReferences":[null]},"spec":{"containers":null}}`,
		`{"metadata":{"annotations":{"openfeature.dev/enabled":true}}}`,
		// Fields this build does not know, and keys in another case.
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","controller":true}],"annotations":{"a/b~c":"1"},"future":1},"spec":{"containers":[{"name":"app","env":[{"name":"A"}],"future":{}}],"future":[1]},"future":"x"}`,
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","controller":true}],"Annotations":{"a":"b"}},"spec":{"Containers":[{"name":"app"}],"containers":[{"name":"x","Env":[]}]},"Spec":{}}`,
		`null`,
		``,
	}
	statefulSet := `{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db","controller":true}`
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			`{"metadata":{"ownerReferences":[`+statefulSet+`],"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":`+q+`,"openfeature.dev/inprocessconfiguration":`+q+`}},"spec":{"containers":[{"name":`+q+`,"ports":[{"containerPort":-1}]}]}}`,
			`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":`+q+`,"controller":true}]}}`,
		)
	}
	// Thousands of references in the annotation, thousands of containers.
	refs := strings.TrimSuffix(strings.Repeat("web,shop/api,other/x,", 2000), ",")
	seeds = append(seeds, `{"metadata":{"ownerReferences":[`+statefulSet+`],"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":"`+refs+`"}}}`)
	containers := strings.TrimSuffix(strings.Repeat(`{"name":"c","ports":[{"containerPort":8013},{"containerPort":8014}]},`, 2000), ",")
	seeds = append(seeds, `{"metadata":{"ownerReferences":[`+statefulSet+`]},"spec":{"containers":[`+containers+`]}}`)
	return seeds
}
