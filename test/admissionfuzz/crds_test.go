package admissionfuzz

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/staging"
	"github.com/flagplane/flagplane/workflows/status"
)

// The fuzz tests of the kinds the API server admits alone (no webhook of
// flagplane's judges them): Flagd, FeatureFlagSourcePolicy; and of the
// schema and CEL rules of FeatureFlagSource and FeatureFlagRolloutPolicy,
// whose webhooks run after them. Each input
// is a create, through the API server's own code (CRD.Create): it never
// panics, answers within the webhook timeout (the API server's own is
// longer; this one is the bound the fuzz tests keep), a refusal names a
// field and why, and the CEL rules stay within their runtime cost budget.
// What it admits, flagplane's Go types read, and the Go code that judges
// it after admission takes it: a Flagd's validation, objects and status
// (flagds), a policy's status and the sidecars it governs, whose pods the
// API server must still take, a rollout policy's webhook
// (webhooks.ValidateRolloutPolicy), plan and status (staging.Next).

// crdTimings are the longest admissions of this process.
var crdTimings Timings

var loadCRDs = sync.OnceValues(func() (map[string]*CRD, error) { return LoadCRDs("../../config/crd/bases") })

func crdOf(tb testing.TB, kind string) *CRD {
	tb.Helper()
	crds, err := loadCRDs()
	if err != nil {
		tb.Fatal(err)
	}
	c, ok := crds[kind]
	if !ok {
		tb.Fatalf("no CRD of kind %s", kind)
	}
	return c
}

// admit creates raw in namespace shop through the API server's code and
// checks the answer.
func admit(t testing.TB, c *CRD, raw []byte) Admission {
	t.Helper()
	var a Admission
	d := crdTimings.Time(c.GVK.Kind+" (API server)", Describe(t.Name(), raw), func() { a = c.Create(context.Background(), "shop", raw) })
	// The API server's work is another process's: its wall time is the measure.
	if d.Wall > Timeout && !RaceDetector {
		t.Errorf("the API server's admission of a %s took %v, more than %v", c.GVK.Kind, d.Wall, Timeout)
	}
	if err := FieldErrors(a.Invalid); err != nil {
		t.Errorf("%v\ninput: %.300q", err, raw)
	}
	if err := OverBudget(a.Invalid); err != nil {
		t.Errorf("a CEL rule of %s ran out of its cost budget: %v\ninput: %.300q", c.GVK.Kind, err, raw)
	}
	return a
}

// decodeAdmitted reads what the API server admitted into flagplane's type:
// its informers must be able to.
func decodeAdmitted(t testing.TB, a Admission, into any) {
	t.Helper()
	raw, err := json.Marshal(a.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("the API server admits what flagplane's types cannot read: %v\nobject: %.500s", err, raw)
	}
}

// conditionsFit checks what a status says: a condition's message holds at
// most 32768 characters (the CRDs' schema of metav1.Condition), or the
// status cannot be written.
func conditionsFit(t testing.TB, what string, conds []metav1.Condition) {
	t.Helper()
	for _, c := range conds {
		if len(c.Message) > 32768 {
			t.Errorf("%s: condition %s has a message of %d bytes: %.200q", what, c.Type, len(c.Message), c.Message)
		}
	}
}

// baseCluster is the namespace the Go code judges admitted objects in: a
// flag set, a file source that selects two Deployments, a kubernetes
// source that targets a third.
const baseCluster = `
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true, "off": false}, defaultVariant: "off"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: web}
spec:
  sources: [{source: flags, provider: file}]
  selector: {matchLabels: {tier: web}}
  port: 9013
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: api}
spec:
  sources: [{source: flags, provider: kubernetes}]
  targetRefs: [{group: apps, kind: Deployment, name: api}]
  envVars: [{name: LOG, value: debug}]
  resources: {requests: {cpu: 100m}, limits: {cpu: "1"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web-1, labels: {tier: web}}
spec:
  selector: {matchLabels: {app: web-1}}
  template: {metadata: {labels: {app: web-1}}, spec: {containers: [{name: app, image: app}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web-2, labels: {tier: web}}
spec:
  selector: {matchLabels: {app: web-2}}
  template: {metadata: {labels: {app: web-2}}, spec: {containers: [{name: app, image: app, ports: [{containerPort: 8080}]}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: api}
spec:
  selector: {matchLabels: {app: api}}
  template: {metadata: {labels: {app: api}}, spec: {containers: [{name: app, image: app}]}}
`

func baseTopology(tb testing.TB) *topology.Topology {
	tb.Helper()
	t := topology.New()
	if err := manifests.Load(t, strings.NewReader(baseCluster)); err != nil {
		tb.Fatal(err)
	}
	return t
}

// object is a JSON object of kind (of flagplane's groups) in namespace shop.
func object(apiVersion, kind, name, spec string) string {
	return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","metadata":{"namespace":"shop","name":` + name + `},"spec":` + spec + `}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// oddStrings are keys and names a user should not write.
var oddStrings = []string{
	"\u200fname", "\u202ename\u202c", "na\x00me", "na\xff\xfeme", "e\u0301\u0301\u0301",
	"\U0001f6a9\U0001f468\u200d\U0001f469", "line\nbreak", "", strings.Repeat("k", 300),
}

func flagdSeeds() []string {
	flagd := func(spec string) string { return object("core.openfeature.dev/v1beta1", "Flagd", `"shop-flagd"`, spec) }
	seeds := []string{
		flagd(`{"featureFlagSource":"web"}`),
		flagd(`{"featureFlagSource":"api","replicas":3,"serviceType":"LoadBalancer","serviceAccountName":"sa","ingress":{"enabled":true,"hosts":["a.example","a.example"],"pathType":"Prefix","tls":[{"hosts":["a.example"],"secretName":"s"}]},"gatewayApiRoutes":{"enabled":true,"hosts":["a.example"],"parentRefs":[{"name":"gw","port":443},{"name":"gw","port":443}]}}`),
		flagd(`{"featureFlagSource":"web","replicas":-1}`),
		flagd(`{"featureFlagSource":"web","replicas":0}`),
		flagd(`{"featureFlagSource":"web","replicas":2147483648}`),
		flagd(`{"featureFlagSource":"web","replicas":1e10}`),
		flagd(`{"featureFlagSource":"web","replicas":"3"}`),
		flagd(`{"featureFlagSource":"web","serviceType":"ExternalName"}`),
		flagd(`{"featureFlagSource":"web","gatewayApiRoutes":{"parentRefs":[{"name":"gw","port":0},{"name":"gw","port":65536},{"name":"gw","port":-1}]}}`),
		flagd(`{"featureFlagSource":"web","labels":{"app":"x","app.kubernetes.io/name":"y"},"annotations":{"a/b/c":"d"}}`),
		flagd(`{"featureFlagSource":"other/web","ingress":{"pathType":"Bogus","flagdPath":"","ofrepPath":"relative"}}`),
		flagd(`{"featureFlagSource":null,"labels":null,"ingress":null}`),
		flagd(`{"featureFlagSource":["web"],"labels":"x","ingress":[]}`),
		flagd(`null`),
		flagd(`"web"`),
		object("core.openfeature.dev/v1beta1", "Flagd", `"1-flagd"`, `{"featureFlagSource":"web"}`),
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"Flagd","metadata":{"name":"shop-flagd","name":"again"},"spec":{"featureFlagSource":"web","featureFlagSource":"api"}}`,
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"name":"shop-flagd"},"spec":{}}`,
		`{"kind":"Flagd"}`,
		``,
	}
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			flagd(`{"featureFlagSource":`+q+`,"serviceAccountName":`+q+`}`),
			flagd(`{"featureFlagSource":"web","labels":{`+q+`:`+q+`},"annotations":{`+q+`:`+q+`}}`),
			flagd(`{"featureFlagSource":"web","ingress":{"enabled":true,"hosts":[`+q+`],"ingressClassName":`+q+`,"flagdPath":`+q+`}}`),
			object("core.openfeature.dev/v1beta1", "Flagd", q, `{"featureFlagSource":"web"}`),
		)
	}
	// The CEL rule on labels runs over every key: thousands of them.
	var labels []string
	for i := range 5000 {
		labels = append(labels, fmt.Sprintf(`"l%d":"v"`, i))
	}
	seeds = append(seeds, flagd(`{"featureFlagSource":"web","labels":{`+strings.Join(labels, ",")+`,"app":"x"}}`))
	return seeds
}

// FuzzFlagdCRD: whatever a Flagd create carries, the API server answers
// clearly and within budget; what it admits, flagplane reads, validates,
// renders and reports on (flagds), with a status it can write.
func FuzzFlagdCRD(f *testing.F) {
	for _, s := range flagdSeeds() {
		f.Add(s)
	}
	c := crdOf(f, "Flagd")
	topo := baseTopology(f)
	f.Cleanup(func() { f.Log("\n" + crdTimings.Report()) })
	f.Fuzz(func(t *testing.T, raw string) {
		a := admit(t, c, []byte(raw))
		if !a.Admitted() {
			return
		}
		fd := &v1beta1.Flagd{}
		decodeAdmitted(t, a, fd)
		d := crdTimings.Time("Flagd (flagds: validation, objects, status)", Describe(t.Name(), []byte(raw)), func() {
			if _, err := topo.UpsertFlagd(fd); err != nil {
				return
			}
			defer topo.DeleteFlagd(fd.Namespace, fd.Name)
			objs := flagds.Desired(topo.Snapshot(), topology.FlagdKey(fd.Namespace, fd.Name), flagds.DefaultOptions())
			if objs == nil {
				t.Fatalf("no objects for a Flagd in the graph")
			}
			st := flagds.DesiredStatus(fd, objs, flagds.Children{})
			conditionsFit(t, "Flagd", st.Conditions)
		})
		if d.Over() && !RaceDetector {
			t.Errorf("flagds took %v on an admitted Flagd", d)
		}
	})
}

func policySeeds() []string {
	policy := func(spec string) string {
		return object("policy.flagplane.dev/v1alpha1", "FeatureFlagSourcePolicy", `"platform"`, spec)
	}
	ns := `"targetRef":{"group":"","kind":"Namespace","name":"shop"}`
	seeds := []string{
		policy(`{` + ns + `,"defaults":{"logFormat":"console","envVars":[{"name":"OTEL","value":"grpc"}]},"overrides":{"strategy":"atomic","debugLogging":false}}`),
		policy(`{` + ns + `}`),
		policy(`{"targetRef":{"group":"","kind":"Namespace","name":"other"},"defaults":{"port":9000}}`),
		policy(`{"targetRef":{"group":"apps","kind":"Deployment","name":"web"},"defaults":{"port":9000}}`),
		policy(`{` + ns + `,"defaults":{"port":0,"managementPort":-1,"ofrepPort":65536}}`),
		policy(`{` + ns + `,"overrides":{"port":8015,"managementPort":8015,"ofrepPort":8015}}`),
		policy(`{` + ns + `,"overrides":{"port":8013,"managementPort":8013}}`),
		policy(`{` + ns + `,"defaults":{"port":"8013","debugLogging":"yes","envVars":{}}}`),
		policy(`{` + ns + `,"overrides":{"envVars":[{"name":"A","value":"1"},{"name":"A","value":"2"}]}}`),
		policy(`{` + ns + `,"overrides":{"envVarPrefix":"1-bad prefix","evaluator":"lua","otelCollectorUri":":4317 x"}}`),
		policy(`{` + ns + `,"overrides":{"resources":{"requests":{"cpu":"2","memory":"1Ei"},"limits":{"cpu":"1"}}}}`),
		policy(`{` + ns + `,"overrides":{"headerToContextMappings":{"X User":"","":"k"},"contextValues":{"":"v"}}}`),
		policy(`{` + ns + `,"defaults":null,"overrides":null}`),
		policy(`{` + ns + `,"defaults":{"strategy":"replace"}}`),
		policy(`null`),
	}
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			policy(`{`+ns+`,"overrides":{"envVarPrefix":`+q+`,"envVars":[{"name":`+q+`,"value":`+q+`}],"contextValues":{`+q+`:`+q+`},"headerToContextMappings":{`+q+`:`+q+`}}}`),
			policy(`{"targetRef":{"group":"","kind":"Namespace","name":`+q+`},"defaults":{"evaluator":`+q+`,"otelCollectorUri":`+q+`}}`),
		)
	}
	return seeds
}

// FuzzSourcePolicyCRD: whatever a FeatureFlagSourcePolicy create carries,
// the API server answers clearly and within budget; what it admits,
// flagplane reads and reports on with a status it can write, and the
// sidecars it governs stay ones the API server takes in a pod.
func FuzzSourcePolicyCRD(f *testing.F) {
	for _, s := range policySeeds() {
		f.Add(s)
	}
	c := crdOf(f, "FeatureFlagSourcePolicy")
	topo := baseTopology(f)
	settings := workflows.Settings{Injection: injection.DefaultOptions()}
	f.Cleanup(func() { f.Log("\n" + crdTimings.Report()) })
	f.Fuzz(func(t *testing.T, raw string) {
		a := admit(t, c, []byte(raw))
		if !a.Admitted() {
			return
		}
		p := &policyv1alpha1.FeatureFlagSourcePolicy{}
		decodeAdmitted(t, a, p)
		d := crdTimings.Time("FeatureFlagSourcePolicy (status, governed sidecars)", Describe(t.Name(), []byte(raw)), func() {
			if _, err := topo.UpsertSourcePolicy(p); err != nil {
				return
			}
			defer topo.DeleteSourcePolicy(p.Namespace, p.Name)
			v := topo.Snapshot()
			st := status.DesiredSourcePolicy(v, p, settings)
			conditionsFit(t, "FeatureFlagSourcePolicy", st.Conditions)
			for _, w := range v.GovernedBySourcePolicies(p.Namespace) {
				if w.Kind == topology.KindFlagd {
					continue
				}
				pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}
				injection.Desired(v, w, settings.Injection).ApplyTo(&pod)
				if problems := podProblems(pod); len(problems) > 0 {
					t.Errorf("policy %s makes the pods of %s ones the API server refuses: %s\ninput: %.300q", p.Name, w, strings.Join(problems, "; "), raw)
				}
			}
		})
		if d.Over() && !RaceDetector {
			t.Errorf("a policy's status and sidecars took %v", d)
		}
	})
}

// podProblems is what the API server would refuse in what an injection
// adds to a pod: env var names, ports out of range, requests above
// limits.
func podProblems(pod corev1.PodSpec) []string {
	var out []string
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				out = append(out, fmt.Sprintf("container %s: env %q: %s", c.Name, e.Name, msg))
			}
		}
		for _, p := range c.Ports {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				out = append(out, fmt.Sprintf("container %s: port %d: %s", c.Name, p.ContainerPort, msg))
			}
		}
		for name, req := range c.Resources.Requests {
			if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
				out = append(out, fmt.Sprintf("container %s: %s request %s above its limit %s", c.Name, name, req.String(), lim.String()))
			}
		}
	}
	return out
}

func sourceSeeds() []string {
	source := func(spec string) string {
		return object("core.openfeature.dev/v1beta1", "FeatureFlagSource", `"web"`, spec)
	}
	ref := func(kind, name string) string { return `{"group":"apps","kind":"` + kind + `","name":"` + name + `"}` }
	var dup, distinct []string
	for i := range 64 {
		dup = append(dup, ref("Deployment", "web"))
		distinct = append(distinct, ref([]string{"Deployment", "StatefulSet", "DaemonSet"}[i%3], fmt.Sprintf("w%d", i)))
	}
	seeds := []string{
		source(`{"sources":[{"source":"flags"}],"targetRefs":[` + ref("Deployment", "web") + `]}`),
		source(`{"sources":[{"source":"flags"}],"targetRefs":[` + strings.Join(dup, ",") + `]}`),
		source(`{"sources":[{"source":"flags"}],"targetRefs":[` + strings.Join(distinct, ",") + `]}`),
		source(`{"sources":[{"source":"flags"}],"targetRefs":[` + strings.Join(distinct, ",") + `,` + ref("Deployment", "one-more") + `]}`),
		source(`{"sources":[{"source":"flags"}],"targetRefs":[{"group":"","kind":"Pod","name":"x"},{"kind":"Deployment","name":"x"}]}`),
		source(`{"sources":[{"source":"flags"}],"targetRefs":[],"selector":{}}`),
		source(`{"sources":[{"source":"flags"}],"targetRefs":[` + ref("Deployment", "web") + `],"selector":{"matchLabels":{"a":"b"}}}`),
		source(`{"sources":[{"source":"flags"}],"port":-1,"managementPort":0,"ofrepPort":65536}`),
		source(`{"sources":[{"source":"flags","interval":-5,"provider":"git"}]}`),
		source(`{"sources":[]}`),
		source(`{"sources":null,"targetRefs":null}`),
		source(`{"sources":[null],"targetRefs":[null]}`),
		source(`{"sources":"flags","targetRefs":{"kind":"Deployment"}}`),
	}
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds, source(`{"sources":[{"source":`+q+`}],"targetRefs":[{"group":`+q+`,"kind":`+q+`,"name":`+q+`}]}`))
	}
	return seeds
}

// FuzzSourceCRD: whatever a FeatureFlagSource create carries, the API
// server's schema and CEL rules (targetRefs, selector) answer clearly and
// within budget, before flagplane's webhook (webhooks.FuzzSourceValidator)
// sees it; what they admit, flagplane's types read, and its status (the
// webhook may be off) is one the status subresource takes.
func FuzzSourceCRD(f *testing.F) {
	for _, s := range sourceSeeds() {
		f.Add(s)
	}
	c := crdOf(f, "FeatureFlagSource")
	topo := baseTopology(f)
	settings := workflows.Settings{Injection: injection.DefaultOptions()}
	f.Cleanup(func() { f.Log("\n" + crdTimings.Report()) })
	f.Fuzz(func(t *testing.T, raw string) {
		a := admit(t, c, []byte(raw))
		if !a.Admitted() {
			return
		}
		src := &v1beta1.FeatureFlagSource{}
		decodeAdmitted(t, a, src)
		if src.Name == "web" || src.Name == "api" {
			src.Name = "fuzzed" // the sources of baseTopology stay as they are
		}
		if _, err := topo.UpsertSource(src); err != nil {
			return
		}
		defer topo.DeleteSource(src.Namespace, src.Name)
		st := status.DesiredSource(topo.Snapshot(), src, observedNothing{}, settings)
		conditionsFit(t, "FeatureFlagSource", st.Conditions)
	})
}

// rolloutCluster is baseCluster with namespace shop labelled, so that
// namespaceSelector steps select its consumers or none.
const rolloutCluster = baseCluster + `
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {stage: canary}}
`

// builtGraph is a topology the webhook judges against, built.
type builtGraph struct{ t *topology.Topology }

func (g builtGraph) Topology() *topology.Topology { return g.t }
func (g builtGraph) GraphBuilt() bool             { return true }

func rolloutPolicySeeds() []string {
	target := `"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"}`
	policy := func(rest string) string {
		return object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`, `{`+target+`,`+rest+`}`)
	}
	prometheus := func(query string) string {
		return `{"type":"Prometheus","prometheus":{"address":"http://prometheus.monitoring.svc:9090","query":` + jsonString(query) + `}}`
	}
	query := `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace=~"$namespaces"})`
	for len(query)+len(` + rate(x[5m])`) <= 4096 {
		query += ` + rate(x[5m])`
	}
	step := func(i int) string {
		return fmt.Sprintf(`{"name":"step-%d","workloadSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["web","w%d"]}]},"pause":"1s","approval":true}`, i, i)
	}
	var steps16, gates8 []string
	for i := range 16 {
		steps16 = append(steps16, step(i))
	}
	gates4 := []string{`{"type":"PodsReady","for":"1m"}`, `{"type":"Restarts","max":3}`, `{"type":"EvaluationErrors"}`, prometheus(query)}
	for _, g := range gates4 {
		gates8 = append(gates8, g, g)
	}
	seeds := []string{
		policy(`"steps":[{"percentage":50,"pause":"5m","approval":true},{"percentage":100}],"gates":[{"type":"PodsReady","for":"30s"},{"type":"Restarts","max":2},{"type":"EvaluationErrors","max":0}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canary"}}},{"workloadSelector":{"matchLabels":{"tier":"web"}}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"canery"}}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchExpressions":[{"key":"stage","operator":"Bogus"},{"key":"stage","operator":"In"},{"key":"bad key!","operator":"Exists","values":["x"]}]}}]`),
		policy(`"steps":[` + strings.Join(steps16, ",") + `],"gates":[` + strings.Join(gates4, ",") + `]`),
		policy(`"steps":[` + strings.Join(append(steps16, step(16)), ",") + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + strings.Join(gates8, ",") + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(query+strings.Repeat(" ", 4096-len(query))) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(query+strings.Repeat(" ", 4097-len(query))) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(strings.Repeat("x{", 2048)) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[` + prometheus(strings.Repeat("(", 2047)+"1"+strings.Repeat(")", 2047)) + `]`),
		policy(`"steps":[{"percentage":100}],"gates":[{"type":"Prometheus","prometheus":{"address":"ftp://x","query":""}},{"type":"Restarts","prometheus":{"address":"http://x","query":"up"}}]`),
		policy(`"steps":[{"percentage":100}],"gates":[{"type":"Prometheus"},{"type":"ErrorBudget"}]`),
		policy(`"steps":[{"percentage":-1},{"percentage":101},{"percentage":2147483647},{"percentage":-2147483648}]`),
		policy(`"steps":[{"percentage":1e10},{"percentage":"50"},{"percentage":50.5}]`),
		policy(`"steps":[{"percentage":50,"namespaceSelector":{}},{}]`),
		policy(`"steps":[{"percentage":50,"pause":"forever"}],"gates":[{"type":"PodsReady","for":"1d"}]`),
		policy(`"steps":[{"percentage":50,"pause":"-5m"}],"gates":[{"type":"PodsReady","for":"9999999999h"},{"type":"Restarts","max":-1}]`),
		policy(`"steps":[],"gates":[]`),
		policy(`"steps":null,"gates":null,"paused":null`),
		policy(`"steps":[null,{"namespaceSelector":null,"workloadSelector":null,"percentage":null}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":null,"matchExpressions":[null,{"key":null,"operator":null,"values":null}]}}]`),
		policy(`"steps":"all","gates":{},"paused":"yes"`),
		object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`, `{"targetRef":{"group":"apps","kind":"Deployment","name":"web"},"steps":[{"percentage":100}]}`),
		object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`, `{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"missing"},"steps":[{"percentage":100}]}`),
		object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`, `{"targetRef":null,"steps":[{"percentage":100}]}`),
		object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`, `null`),
		`{"apiVersion":"delivery.flagplane.dev/v1alpha1","kind":"FeatureFlagRolloutPolicy","metadata":{"name":"canary"},"spec":{` + target + `,"steps":[{"percentage":100}]},"status":{"phase":"Completed","step":99,"message":"forged"}}`,
	}
	for _, s := range oddStrings {
		q := jsonString(s)
		seeds = append(seeds,
			object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`, `{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":`+q+`},"steps":[{"name":`+q+`,"percentage":100}]}`),
			policy(`"steps":[{"name":`+q+`,"namespaceSelector":{"matchLabels":{`+q+`:`+q+`}}},{"workloadSelector":{"matchExpressions":[{"key":`+q+`,"operator":`+q+`,"values":[`+q+`]}]}}]`),
			policy(`"steps":[{"percentage":100}],"gates":[`+prometheus(`sum(x{l=`+q+`})`)+`,{"type":"Prometheus","prometheus":{"address":"http://`+strings.Trim(q, `"`)+`","query":`+q+`}}]`),
			object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", q, `{`+target+`,"steps":[{"percentage":100}]}`),
		)
	}
	// Selectors the schema does not bound: thousands of labels and
	// expressions, values of hundreds of KiB.
	var labels, exprs []string
	for i := range 5000 {
		labels = append(labels, fmt.Sprintf(`"l%d":"v%d"`, i, i))
		exprs = append(exprs, fmt.Sprintf(`{"key":"k%d","operator":"NotIn","values":["a","b"]}`, i))
	}
	big := strings.Repeat("x", 300<<10)
	seeds = append(seeds,
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{`+strings.Join(labels, ",")+`}}}]`),
		policy(`"steps":[{"workloadSelector":{"matchExpressions":[`+strings.Join(exprs, ",")+`]}}]`),
		policy(`"steps":[{"namespaceSelector":{"matchLabels":{"stage":"`+big+`"}}},{"workloadSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["`+big+`"]}]}}]`),
	)
	return seeds
}

// FuzzRolloutPolicyCRD: whatever a FeatureFlagRolloutPolicy create
// carries, the API server's schema and CEL rules answer clearly and within
// budget; what they admit, flagplane's types read, and flagplane's
// webhook (RolloutPolicyValidator, whose judgement is
// webhooks.ValidateRolloutPolicy), with Prometheus gates off and on,
// answers in time and clearly. What the webhook would refuse may still be
// stored (written before the webhook was installed): the manager's plan
// and status of it (staging.Next) are ones the status subresource takes.
func FuzzRolloutPolicyCRD(f *testing.F) {
	for _, s := range rolloutPolicySeeds() {
		f.Add(s)
	}
	c := crdOf(f, "FeatureFlagRolloutPolicy")
	topo := topology.New()
	if err := manifests.Load(topo, strings.NewReader(rolloutCluster)); err != nil {
		f.Fatal(err)
	}
	validators := []*webhooks.RolloutPolicyValidator{{Graph: builtGraph{topo}}, {Graph: builtGraph{topo}, PrometheusGates: true}}
	f.Cleanup(func() { f.Log("\n" + crdTimings.Report()) })
	f.Fuzz(func(t *testing.T, raw string) {
		a := admit(t, c, []byte(raw))
		if !a.Admitted() {
			return
		}
		p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
		decodeAdmitted(t, a, p)
		stored, err := json.Marshal(a.Object)
		if err != nil {
			t.Fatal(err)
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "fuzz", Operation: admissionv1.Create, Namespace: "shop", Name: p.Name,
			Kind:   metav1.GroupVersionKind{Group: c.GVK.Group, Version: c.GVK.Version, Kind: c.GVK.Kind},
			Object: runtime.RawExtension{Raw: stored},
		}}
		for _, v := range validators {
			var resp admission.Response
			d := crdTimings.Time("FeatureFlagRolloutPolicy (ValidateRolloutPolicy)", Describe(t.Name(), []byte(raw)), func() {
				resp = v.Handle(context.Background(), req)
			})
			if d.Over() && !RaceDetector {
				t.Errorf("the webhook took %v on an admitted policy", d)
			}
			if err := Response(resp.AdmissionResponse); err != nil {
				t.Errorf("the webhook's answer to an admitted policy is not a clear one: %v\ninput: %.300q", err, raw)
			}
			if !resp.Allowed && resp.Result.Code != http.StatusUnprocessableEntity {
				t.Errorf("the webhook cannot read a policy the API server admits: %s", resp.Result.Message)
			}
		}
		d := crdTimings.Time("FeatureFlagRolloutPolicy (plan, status)", Describe(t.Name(), []byte(raw)), func() {
			if _, err := topo.UpsertRolloutPolicy(p); err != nil {
				return
			}
			defer topo.DeleteRolloutPolicy(p.Namespace, p.Name)
			v := topo.Snapshot()
			plan := v.RolloutPlan(topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name))
			for _, prometheus := range []bool{false, true} {
				st := staging.Next(p, plan, staging.Observation{Now: time.Now(), PrometheusGates: prometheus}).Status
				rolloutStatusFits(t, st)
			}
		})
		if d.Over() && !RaceDetector {
			t.Errorf("a policy's plan and status took %v", d)
		}
	})
}

// rolloutStatusFits checks a rollout policy's status against the bounds
// of its schema, which the API server holds a status write to.
func rolloutStatusFits(t testing.TB, st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) {
	t.Helper()
	conditionsFit(t, "FeatureFlagRolloutPolicy", st.Conditions)
	if n := utf8.RuneCountInString(st.Message); n > staging.MessageMaxLength {
		t.Errorf("a status message of %d characters, more than %d: %.200q", n, staging.MessageMaxLength, st.Message)
	}
	if len(st.Conditions) > 8 || len(st.Steps) > 17 || len(st.Unstaged) > 32 {
		t.Errorf("a status of %d conditions, %d steps, %d unstaged: more than 8, 17, 32", len(st.Conditions), len(st.Steps), len(st.Unstaged))
	}
	for _, s := range st.Steps {
		if len(s.Consumers) > 64 {
			t.Errorf("step %q lists %d consumers, more than 64", s.Name, len(s.Consumers))
		}
	}
}

// TestCRDRuleCosts: the API server accepts every CRD of config/crd/bases
// (its own validation of a CRD, which refuses rules whose estimated cost
// is too high), and every rule's estimated cost, and their total, are
// within the limits it enforces; the costs are logged.
func TestCRDRuleCosts(t *testing.T) {
	crds, err := loadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range sortedKinds(crds) {
		c := crds[kind]
		if errs := c.ValidateDefinition(context.Background()); len(errs) > 0 {
			t.Errorf("the API server refuses the CRD of %s: %v", kind, errs.ToAggregate())
		}
		costs, total, err := c.RuleCosts()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for _, r := range costs {
			t.Logf("%s: %s: estimated cost %d of %d (%s)", kind, r.Path, r.Cost, RuleCostLimit, r.Rule)
			if r.Cost > RuleCostLimit {
				t.Errorf("%s: rule %s costs %d, more than the API server's %d", kind, r.Path, r.Cost, RuleCostLimit)
			}
		}
		t.Logf("%s: %d rules, estimated cost %d in all of %d", kind, len(costs), total, CRDCostLimit)
		if total > CRDCostLimit {
			t.Errorf("%s: the rules cost %d in all, more than the API server's %d", kind, total, CRDCostLimit)
		}
	}
}

func sortedKinds(crds map[string]*CRD) []string {
	kinds := make([]string, 0, len(crds))
	for k := range crds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// observedNothing is a cluster where no generated object exists yet.
type observedNothing struct{}

func (observedNothing) ConfigMapData(string, string) (map[string]string, bool) { return nil, false }
func (observedNothing) Role(string, string) *rbacv1.Role                       { return nil }
func (observedNothing) RoleBinding(string, string) *rbacv1.RoleBinding         { return nil }
func (observedNothing) WriteFailure(string, string, string) workflows.Failure {
	return workflows.Failure{}
}

// TestAdmittedExtremes: what the API server admits at its limits, the Go
// code that judges it after admission judges in time, with a status it
// can write (a condition's message holds at most 32768 characters).
func TestAdmittedExtremes(t *testing.T) {
	t.Cleanup(func() { t.Log("\n" + crdTimings.Report()) })
	t.Run("a Flagd of 20,000 invalid labels", func(t *testing.T) {
		var labels []string
		for i := range 20000 {
			labels = append(labels, fmt.Sprintf(`"bad key %d":"bad value %d!"`, i, i))
		}
		raw := []byte(object("core.openfeature.dev/v1beta1", "Flagd", `"shop-flagd"`, `{"featureFlagSource":"web","labels":{`+strings.Join(labels, ",")+`}}`))
		a := admit(t, crdOf(t, "Flagd"), raw)
		if !a.Admitted() {
			t.Fatalf("the API server refuses it: %v", a.Invalid.ToAggregate())
		}
		fd := &v1beta1.Flagd{}
		decodeAdmitted(t, a, fd)
		topo := baseTopology(t)
		if _, err := topo.UpsertFlagd(fd); err != nil {
			t.Fatal(err)
		}
		var st v1beta1.FlagdStatus
		d := crdTimings.Time("Flagd (flagds: validation, objects, status)", Describe(t.Name(), raw), func() {
			objs := flagds.Desired(topo.Snapshot(), topology.FlagdKey(fd.Namespace, fd.Name), flagds.DefaultOptions())
			st = flagds.DesiredStatus(fd, objs, flagds.Children{})
		})
		if d.Over() && !RaceDetector {
			t.Errorf("flagds took %v", d)
		}
		conditionsFit(t, "Flagd", st.Conditions)
	})
	// Of 1 MiB: at the request's 3 MiB the API server's own admission
	// takes 1.7 s on an idle machine (OpenAPI validation of 190,000
	// expressions) and 11 s while make fuzz-short runs the webhooks'
	// extremes beside it; TestAdmissionExtremes sends the webhook 3 MiB.
	t.Run("a FeatureFlagRolloutPolicy of 16 steps of selectors of 1 MiB, and a gate of each type", func(t *testing.T) {
		expr := `{"key":"k00000","operator":"NotIn","values":["a","b"]}`
		n := (1 << 20) / 16 / (len(expr) + 1)
		var steps []string
		for s := range 16 {
			exprs := make([]string, n)
			for i := range exprs {
				exprs[i] = fmt.Sprintf(`{"key":"k%05d","operator":"NotIn","values":["a","b"]}`, (s*n+i)%100000)
			}
			steps = append(steps, fmt.Sprintf(`{"name":"step-%d","namespaceSelector":{"matchExpressions":[%s]},"pause":"1h","approval":true}`, s, strings.Join(exprs, ",")))
		}
		query := `sum(feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR",namespace=~"$namespaces"})`
		for len(query)+len(` + rate(x[5m])`) <= 4096 {
			query += ` + rate(x[5m])`
		}
		raw := []byte(object("delivery.flagplane.dev/v1alpha1", "FeatureFlagRolloutPolicy", `"canary"`,
			`{"targetRef":{"group":"core.openfeature.dev","kind":"FeatureFlag","name":"flags"},"steps":[`+strings.Join(steps, ",")+`],`+
				`"gates":[{"type":"PodsReady","for":"1m"},{"type":"Restarts","max":3},{"type":"EvaluationErrors"},`+
				`{"type":"Prometheus","prometheus":{"address":"http://prometheus.monitoring.svc:9090","query":`+jsonString(query)+`}}]}`))
		a := admit(t, crdOf(t, "FeatureFlagRolloutPolicy"), raw)
		if !a.Admitted() {
			t.Fatalf("the API server refuses it (%d bytes): %v", len(raw), a.Invalid.ToAggregate())
		}
		p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
		decodeAdmitted(t, a, p)
		topo := topology.New()
		if err := manifests.Load(topo, strings.NewReader(rolloutCluster)); err != nil {
			t.Fatal(err)
		}
		stored, err := json.Marshal(a.Object)
		if err != nil {
			t.Fatal(err)
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "extreme", Operation: admissionv1.Create, Namespace: "shop",
			Name: p.Name, Object: runtime.RawExtension{Raw: stored}}}
		var resp admission.Response
		d := crdTimings.Time("FeatureFlagRolloutPolicy (ValidateRolloutPolicy)", Describe(t.Name(), raw), func() {
			resp = (&webhooks.RolloutPolicyValidator{Graph: builtGraph{topo}, PrometheusGates: true}).Handle(context.Background(), req)
		})
		if d.Over() && !RaceDetector {
			t.Errorf("the webhook took %v", d)
		}
		if !resp.Allowed {
			t.Errorf("the webhook refuses it: %.500s", resp.Result.Message)
		}
		if _, err := topo.UpsertRolloutPolicy(p); err != nil {
			t.Fatal(err)
		}
		d = crdTimings.Time("FeatureFlagRolloutPolicy (plan, status)", Describe(t.Name(), raw), func() {
			plan := topo.Snapshot().RolloutPlan(topology.FlagSetKey("shop", "flags"))
			rolloutStatusFits(t, staging.Next(p, plan, staging.Observation{Now: time.Now(), PrometheusGates: true}).Status)
		})
		if d.Over() && !RaceDetector {
			t.Errorf("the plan and status took %v", d)
		}
	})
	t.Run("a FeatureFlagSource of 256 invalid entries of 8 KiB", func(t *testing.T) {
		entries := strings.TrimSuffix(strings.Repeat(`{"source":"a/b/`+strings.Repeat("x", 8<<10)+`"},`, 256), ",")
		raw := []byte(object("core.openfeature.dev/v1beta1", "FeatureFlagSource", `"web"`, `{"sources":[`+entries+`]}`))
		a := admit(t, crdOf(t, "FeatureFlagSource"), raw)
		if !a.Admitted() {
			t.Fatalf("the API server refuses it: %v", a.Invalid.ToAggregate())
		}
		src := &v1beta1.FeatureFlagSource{}
		decodeAdmitted(t, a, src)
		topo := baseTopology(t)
		if _, err := topo.UpsertSource(src); err != nil {
			t.Fatal(err)
		}
		st := status.DesiredSource(topo.Snapshot(), src, observedNothing{}, workflows.Settings{Injection: injection.DefaultOptions()})
		conditionsFit(t, "FeatureFlagSource", st.Conditions)
	})
}
