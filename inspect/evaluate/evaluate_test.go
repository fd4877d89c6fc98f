package evaluate_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/evaluate"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// load renders a FeatureFlag as flagplane serves it and loads it.
func load(t *testing.T, manifest string) *evaluate.FlagSet {
	t.Helper()
	ff := &v1beta1.FeatureFlag{}
	if err := yaml.UnmarshalStrict([]byte(manifest), ff); err != nil {
		t.Fatal(err)
	}
	doc, err := flagsets.Render(ff)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := evaluate.Load(doc)
	if err != nil {
		t.Fatalf("loading %s: %v", doc, err)
	}
	return fs
}

// A flag set with shared evaluators ($ref) and targeting with flagd's
// operators. The fractional expectations are flagd's own (core/pkg/evaluator
// fractional_test.go, which the flagd documentation's examples follow): the
// bucket of a user depends on murmur3 of the flag key and the bucketing
// value, so the flag is named headerColor as there.
const shop = `
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {name: shop, namespace: shop}
spec:
  flagSpec:
    $evaluators:
      is-staff: {ends_with: [{var: email}, "@example.com"]}
    flags:
      staff-banner:
        state: ENABLED
        variants: {"on": true, "off": false}
        defaultVariant: "off"
        targeting: {if: [{$ref: is-staff}, "on", null]}
      region-color:
        state: ENABLED
        variants: {red: red, blue: blue, green: green}
        defaultVariant: red
        targeting:
          if:
            - {in: [{var: region}, [eu, uk]]}
            - blue
            - {starts_with: [{var: region}, "us-"]}
            - green
            - null
      headerColor:
        state: ENABLED
        variants: {red: "#FF0000", blue: "#0000FF", green: "#00FF00", yellow: "#FFFF00"}
        defaultVariant: red
        targeting:
          if:
            - {in: ["@faas.com", {var: [email]}]}
            - fractional:
                - {cat: [{var: $flagd.flagKey}, {var: email}]}
                - [red, 25]
                - [blue, 25]
                - [green, 25]
                - [yellow, 25]
            - null
      new-ui:
        state: ENABLED
        variants: {"on": true, "off": false}
        defaultVariant: "off"
        targeting: {if: [{sem_ver: [{var: appVersion}, ">=", "2.1.0"]}, "on", "off"]}
      retired:
        state: DISABLED
        variants: {"on": true, "off": false}
        defaultVariant: "on"
      page-size:
        state: ENABLED
        variants: {small: 10, large: 50}
        defaultVariant: small
      theme:
        state: ENABLED
        variants: {plain: {color: grey}, bold: {color: black, weight: 700}}
        defaultVariant: plain
        targeting: {if: [{"==": [{var: tier}, gold]}, bold, null]}
      broken-ref:
        state: ENABLED
        variants: {a: a, b: b}
        defaultVariant: a
        targeting: {if: [{$ref: no-such-evaluator}, b, null]}
      stray-variant:
        state: ENABLED
        variants: {a: a, b: b}
        defaultVariant: a
        targeting: {if: [true, c, null]}
`

func TestResolve(t *testing.T) {
	fs := load(t, shop)
	hex := map[string]string{"red": "#FF0000", "blue": "#0000FF", "green": "#00FF00", "yellow": "#FFFF00"}
	tests := []struct {
		name string
		flag string
		ctx  map[string]any
		want evaluate.Resolution
	}{
		{"$ref: a staff email", "staff-banner", map[string]any{"email": "ana@example.com"},
			evaluate.Resolution{Type: evaluate.Boolean, Value: true, Variant: "on", Reason: "TARGETING_MATCH"}},
		{"$ref: another email, targeting null", "staff-banner", map[string]any{"email": "bo@example.org"},
			evaluate.Resolution{Type: evaluate.Boolean, Value: false, Variant: "off", Reason: "DEFAULT"}},
		{"$ref: no email", "staff-banner", nil,
			evaluate.Resolution{Type: evaluate.Boolean, Value: false, Variant: "off", Reason: "DEFAULT"}},
		{"in: a listed region", "region-color", map[string]any{"region": "uk"},
			evaluate.Resolution{Type: evaluate.String, Value: "blue", Variant: "blue", Reason: "TARGETING_MATCH"}},
		{"starts_with", "region-color", map[string]any{"region": "us-east"},
			evaluate.Resolution{Type: evaluate.String, Value: "green", Variant: "green", Reason: "TARGETING_MATCH"}},
		{"no rule matches", "region-color", map[string]any{"region": "apac"},
			evaluate.Resolution{Type: evaluate.String, Value: "red", Variant: "red", Reason: "DEFAULT"}},
		{"sem_ver: newer", "new-ui", map[string]any{"appVersion": "2.1.3"},
			evaluate.Resolution{Type: evaluate.Boolean, Value: true, Variant: "on", Reason: "TARGETING_MATCH"}},
		{"sem_ver: older", "new-ui", map[string]any{"appVersion": "2.0.9"},
			evaluate.Resolution{Type: evaluate.Boolean, Value: false, Variant: "off", Reason: "TARGETING_MATCH"}},
		{"disabled: the zero value, no variant", "retired", nil,
			evaluate.Resolution{Type: evaluate.Boolean, Value: false, Reason: "DISABLED"}},
		{"a number", "page-size", nil,
			evaluate.Resolution{Type: evaluate.Number, Value: 10.0, Variant: "small", Reason: "STATIC"}},
		{"an object", "theme", map[string]any{"tier": "gold"},
			evaluate.Resolution{Type: evaluate.Object, Value: map[string]any{"color": "black", "weight": 700.0}, Variant: "bold", Reason: "TARGETING_MATCH"}},
		{"a $ref to no evaluator: flagd cannot parse the rule", "broken-ref", nil,
			evaluate.Resolution{Type: evaluate.String, Reason: "ERROR", ErrorCode: "PARSE_ERROR"}},
		{"targeting names no variant", "stray-variant", nil,
			evaluate.Resolution{Type: evaluate.String, Reason: "ERROR", ErrorCode: "GENERAL"}},
		{"a flag the set does not have", "nope", nil,
			evaluate.Resolution{Type: evaluate.Boolean, Reason: "ERROR", ErrorCode: "FLAG_NOT_FOUND"}},
	}
	for email, variant := range map[string]string{"rachel@faas.com": "blue", "monica@faas.com": "yellow", "joey@faas.com": "red", "ross@faas.com": "blue"} {
		tests = append(tests, struct {
			name string
			flag string
			ctx  map[string]any
			want evaluate.Resolution
		}{"fractional: " + email, "headerColor", map[string]any{"email": email},
			evaluate.Resolution{Type: evaluate.String, Value: hex[variant], Variant: variant, Reason: "TARGETING_MATCH"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			typ := tt.want.Type
			if got, ok := fs.TypeOf(tt.flag); ok {
				g.Expect(got).To(Equal(typ), "the flag's type")
			}
			g.Expect(fs.Resolve(tt.flag, typ, tt.ctx)).To(Equal(tt.want))
		})
	}

	g := NewWithT(t)
	g.Expect(fs.Resolve("staff-banner", evaluate.String, nil)).To(Equal(
		evaluate.Resolution{Type: evaluate.String, Reason: "ERROR", ErrorCode: "TYPE_MISMATCH"}), "a boolean flag asked as a string")
	g.Expect(fs.Keys()).To(Equal([]string{"broken-ref", "headerColor", "new-ui", "page-size", "region-color", "retired", "staff-banner", "stray-variant", "theme"}))
}

// TestFractionalTargetingKey: fractional with no bucketing value buckets
// by the flag key and the context's targetingKey (flagd's own expectation
// for foo@foo.com), and serves the default without one.
func TestFractionalTargetingKey(t *testing.T) {
	g := NewWithT(t)
	fs := load(t, `
kind: FeatureFlag
metadata: {name: f}
spec:
  flagSpec:
    flags:
      headerColor:
        state: ENABLED
        variants: {red: "#FF0000", blue: "#0000FF", green: "#00FF00", yellow: "#FFFF00"}
        defaultVariant: red
        targeting: {fractional: [[blue, 50], [green, 50]]}
`)
	g.Expect(fs.Resolve("headerColor", evaluate.String, map[string]any{"targetingKey": "foo@foo.com"})).To(Equal(
		evaluate.Resolution{Type: evaluate.String, Value: "#00FF00", Variant: "green", Reason: "TARGETING_MATCH"}))
	g.Expect(fs.Resolve("headerColor", evaluate.String, nil)).To(Equal(
		evaluate.Resolution{Type: evaluate.String, Value: "#FF0000", Variant: "red", Reason: "DEFAULT"}))
	// Half the users each way, give or take.
	counts := map[string]int{}
	for i := range 1000 {
		counts[fs.Resolve("headerColor", evaluate.String, map[string]any{"targetingKey": "user-" + strconv.Itoa(i)}).Variant]++
	}
	g.Expect(counts["blue"]).To(BeNumerically("~", 500, 60))
	g.Expect(counts["green"]).To(BeNumerically("~", 500, 60))
}

// TestLoadRefuses: flagd refuses a whole flag set whose default variant is
// not a variant (and keeps serving what it had).
func TestLoadRefuses(t *testing.T) {
	g := NewWithT(t)
	_, err := evaluate.Load(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true},"defaultVariant":"blue"}}}`)
	g.Expect(err).To(MatchError(ContainSubstring("default variant: 'blue' isn't a valid variant of flag: 'f'")))
	_, err = evaluate.Load(`{"flags":`)
	g.Expect(err).To(HaveOccurred())
	g.Expect(evaluate.Empty().Resolve("f", evaluate.Boolean, nil)).To(HaveField("ErrorCode", "FLAG_NOT_FOUND"))
}

// TestSameFlagdAsBin: the evaluator linked here is the one the flagd of
// hack/tools/flagd (bin/flagd, which the real-client suites run) is built
// with, and so are the libraries its operators are made of.
func TestSameFlagdAsBin(t *testing.T) {
	g := NewWithT(t)
	root := filepath.Join("..", "..")
	ours, theirs := requires(t, filepath.Join(root, "go.mod")), requires(t, filepath.Join(root, "hack", "tools", "flagd", "go.mod"))
	g.Expect(theirs["github.com/open-feature/flagd/flagd"]).To(Equal(evaluate.FlagdVersion))
	g.Expect(ours["github.com/open-feature/flagd/core"]).To(Equal(evaluate.FlagdVersion))
	for _, m := range []string{"github.com/open-feature/flagd/core", "github.com/diegoholiveira/jsonlogic/v3", "github.com/twmb/murmur3"} {
		g.Expect(ours[m]).NotTo(BeEmpty(), m)
		g.Expect(ours[m]).To(Equal(theirs[m]), "%s: go.mod and hack/tools/flagd/go.mod", m)
	}
}

// requires reads the require lines of a go.mod.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && strings.Contains(fields[0], ".") && strings.HasPrefix(fields[1], "v") {
			out[fields[0]] = fields[1]
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParseContexts: YAML or JSON; numbers are float64, as flagd gets
// them from a request's JSON (structpb).
func TestParseContexts(t *testing.T) {
	g := NewWithT(t)
	want := []evaluate.Context{
		{Name: "a", Context: map[string]any{"age": 42.0, "tags": []any{"x"}, "targetingKey": "u1"}},
		{Name: "b", Context: map[string]any{}},
	}
	got, err := evaluate.ParseContexts([]byte(`[{"name":"a","context":{"age":42,"tags":["x"],"targetingKey":"u1"}},{"name":"b"}]`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	got, err = evaluate.ParseContexts([]byte("- name: a\n  context: {age: 42, tags: [x], targetingKey: u1}\n- name: b\n  context: null\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
}

// TestServingMerge: flagd's order, lowest first: the request's context, the
// static values, the mapped headers the request sends (case-insensitive,
// empty ones ignored).
func TestServingMerge(t *testing.T) {
	g := NewWithT(t)
	s := evaluate.Serving{ContextValues: map[string]string{"region": "eu", "env": "prod"}, HeaderMappings: map[string]string{"X-Tier": "tier", "X-Email": "email"}}
	c := evaluate.Context{Name: "c", Context: map[string]any{"region": "us", "tier": "bronze", "email": "a@example.com", "age": 3.0},
		Headers: map[string]string{"x-tier": "gold", "X-Email": "", "X-Other": "o"}}
	g.Expect(s.Merge(c)).To(Equal(map[string]any{"region": "eu", "env": "prod", "tier": "gold", "email": "a@example.com", "age": 3.0}))
	g.Expect(c.Context).To(HaveKeyWithValue("region", "us"), "the request's context is left as it is")
	g.Expect(evaluate.Serving{}.Merge(c)).To(Equal(c.Context))

	contexts, err := evaluate.ParseContexts([]byte("- {name: a, context: {x: 1}, headers: {X-Tier: gold}}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(contexts[0].Headers).To(Equal(map[string]string{"X-Tier": "gold"}))
	_, err = evaluate.ParseContexts([]byte("- {name: a, headers: {X-Tier: [gold]}}\n"))
	g.Expect(err).To(MatchError(ContainSubstring("headers a map of strings")))
}

// TestCompareStack: a flagd that serves other flag sets answers a key
// that several hold from the last of its sources: a later one hides the
// flag set's keys (Shadowed, never changed by the edit), and the flag set
// hides an earlier one's, which answers a key the flag set drops.
func TestCompareStack(t *testing.T) {
	g := NewWithT(t)
	doc := func(flags string) string { return `{"flags": {` + flags + `}}` }
	static := func(key, variant string) string {
		return `"` + key + `": {"state": "ENABLED", "variants": {"on": true, "off": false}, "defaultVariant": "` + variant + `"}`
	}
	before := doc(static("a", "off") + "," + static("b", "off") + "," + static("c", "off"))
	after := doc(static("a", "on") + "," + static("b", "on"))
	stack := evaluate.Stack{
		Lower: []string{doc(static("c", "on") + "," + static("b", "off"))},
		Upper: []string{doc(static("a", "off"))},
	}
	ch := evaluate.CompareStack(stack, before, after, []evaluate.Context{{Name: "any"}}, evaluate.Serving{})
	g.Expect(ch.Shadowed).To(Equal([]string{"a"}), "a later source holds a")
	g.Expect(ch.Contexts[0].Changed).To(ConsistOf(
		And(HaveField("Flag", "b"), HaveField("After.Variant", "on")),
		// c is dropped: the earlier source's c answers now.
		And(HaveField("Flag", "c"), HaveField("Before.Variant", "off"), HaveField("After.Variant", "on")),
	))
	alone := evaluate.Compare(before, after, []evaluate.Context{{Name: "any"}}, evaluate.Serving{})
	g.Expect(alone.Shadowed).To(BeEmpty())
	g.Expect(alone.Contexts[0].Changed).To(HaveLen(3), "served alone, every flag's answer changes")
}
