package admissionfuzz

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/status"
)

// The fuzz tests of the kinds the API server admits alone (no webhook of
// flagplane's judges them): Flagd, FeatureFlagSourcePolicy, and the CEL
// rules of FeatureFlagSource, whose webhook runs after them. Each input
// is a create, through the API server's own code (CRD.Create): it never
// panics, answers within the webhook timeout (the API server's own is
// longer; this one is the bound the fuzz tests keep), a refusal names a
// field and why, and the CEL rules stay within their runtime cost budget.
// What it admits, flagplane's Go types read, and the Go code that judges
// it after admission takes it: a Flagd's validation, objects and status
// (flagds), a policy's status and the sidecars it governs, whose pods the
// API server must still take.

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
	if d > Timeout && !RaceDetector {
		t.Errorf("the API server's admission of a %s took %v, more than %v", c.GVK.Kind, d, Timeout)
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
		if d > Timeout && !RaceDetector {
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
		if d > Timeout && !RaceDetector {
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
		if d > Timeout && !RaceDetector {
			t.Errorf("flagds took %v", d)
		}
		conditionsFit(t, "Flagd", st.Conditions)
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
