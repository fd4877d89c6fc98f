package flagsets

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// flagSchemasDir is the json folder of the flagd-schemas module this build
// uses: its test corpus is the data of the corpus tests, so that a version
// bump brings its cases along.
func flagSchemasDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/open-feature/flagd-schemas").Output()
	if err != nil {
		t.Fatalf("locating the flagd-schemas module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "json")
	if _, err := os.Stat(filepath.Join(dir, "test")); err != nil {
		t.Fatalf("flagd-schemas corpus not found: %v", err)
	}
	return dir
}

type corpusCase struct {
	name, path string
	positive   bool
	// schema is flags, flagd or targeting: what the file is a document of.
	schema string
	doc    map[string]any
	raw    []byte
}

func flagSchemaCorpus(t *testing.T) []corpusCase {
	t.Helper()
	root := filepath.Join(flagSchemasDir(t), "test")
	var cases []corpusCase
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		parts := strings.Split(rel, string(filepath.Separator))
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			return err
		}
		doc, _ := v.(map[string]any)
		c := corpusCase{name: rel, path: path, positive: parts[1] == "positive", doc: doc, raw: raw, schema: "targeting"}
		if s, ok := doc["$schema"].(string); ok {
			c.schema = strings.TrimSuffix(filepath.Base(s), ".json")
		}
		cases = append(cases, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 25 {
		t.Fatalf("expected the whole corpus, found %d files", len(cases))
	}
	return cases
}

// TestFlagSchemaCorpus: the embedded schemas, as compiled here, decide every
// file of flagd-schemas' own corpus the way flagd-schemas says.
func TestFlagSchemaCorpus(t *testing.T) {
	schemas, err := CompiledFlagSchemas()
	if err != nil {
		t.Fatal(err)
	}
	bySchema := map[string]*jsonschema.Schema{"flags": schemas.Flags, "flagd": schemas.Flagd, "targeting": schemas.Targeting}
	for _, c := range flagSchemaCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			err := bySchema[c.schema].Validate(c.doc)
			if c.positive && err != nil {
				t.Fatalf("positive case rejected: %v", err)
			}
			if !c.positive && err == nil {
				t.Fatalf("negative case accepted")
			}
		})
	}
}

// corpusDeviations are the positive corpus files flagplane admits with a
// warning, and why: a FeatureFlag's defaultVariant is required by the CRD
// (as in the OpenFeature Operator), so "no default variant" can only be an
// empty one, which flagd loads but evaluates to an error where no targeting
// rule picks a variant.
var corpusDeviations = map[string]string{
	"flags/positive/null-default-variant.json":      "defaultVariant",
	"flags/positive/undefined-default-variant.json": "defaultVariant",
	"flags/positive/no-default-variant.json":        "defaultVariant",
}

// TestFlagSchemaCorpusThroughValidator runs the corpus through the
// validator a FeatureFlag meets (semantic rules plus schema): every flag set
// of the corpus that a FeatureFlag can hold (flags as an object) is accepted
// when positive and rejected when negative; every targeting rule is
// accepted or rejected as the targeting of a flag.
func TestFlagSchemaCorpusThroughValidator(t *testing.T) {
	for _, c := range flagSchemaCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			var spec v1beta1.FlagSpec
			switch c.schema {
			case "targeting":
				spec = targetingFlagSet(t, c.raw)
			default:
				if err := json.Unmarshal(c.raw, &spec); err != nil {
					if c.positive && strings.Contains(c.name, "array") {
						t.Skip("flags as an array: flagd's own format, not a FeatureFlag's")
					}
					if !c.positive {
						return // the CRD's schema refuses it before any webhook
					}
					t.Fatalf("positive case does not decode: %v", err)
				}
			}
			errs, warnings := ValidateFlagSpec(&spec, field.NewPath("spec", "flagSpec"))
			if want, ok := corpusDeviations[filepath.ToSlash(c.name)]; ok {
				g.Expect(errs).To(BeEmpty())
				g.Expect(warnings.ToAggregate()).To(MatchError(ContainSubstring(want)), "documented deviation")
				return
			}
			switch {
			case c.positive:
				g.Expect(errs).To(BeEmpty())
			case len(errs) == 0:
				// The OpenFeature Operator checks the flags against the
				// schema, not the flag-set metadata or $evaluators, and
				// flagd loads them: a warning there.
				g.Expect(warnings).NotTo(BeEmpty(), "negative case accepted without a warning")
				for _, w := range warnings {
					g.Expect(w.Field).To(Or(HavePrefix("spec.flagSpec.metadata"), HavePrefix("spec.flagSpec.$evaluators")), "only set-level problems are warnings")
				}
				t.Logf("admitted with warnings: %v", warnings.ToAggregate())
			default:
				t.Logf("rejected: %v", errs.ToAggregate())
			}
		})
	}
}

// targetingFlagSet makes a flag set whose one flag has the rule as its
// targeting and, as variants, every variant name the rule can return; every
// $ref of the rule names an evaluator of the set.
func targetingFlagSet(t *testing.T, raw []byte) v1beta1.FlagSpec {
	t.Helper()
	var rule any
	if err := json.Unmarshal(raw, &rule); err != nil {
		t.Fatal(err)
	}
	variants := map[string]string{"default": "default"}
	for _, r := range ruleResults(rule) {
		variants[r] = r
	}
	vb, _ := json.Marshal(variants)
	evaluators := map[string]any{}
	for _, ref := range collectRefs(rule) {
		evaluators[ref] = map[string]any{"==": []any{1, 1}}
	}
	eb, _ := json.Marshal(evaluators)
	return v1beta1.FlagSpec{Evaluators: eb, Flags: map[string]v1beta1.Flag{"f": {
		State: v1beta1.FlagStateEnabled, Variants: vb, DefaultVariant: "default", Targeting: raw,
	}}}
}

func flagWith(mutate func(*v1beta1.Flag)) v1beta1.Flag {
	f := v1beta1.Flag{State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off"}
	mutate(&f)
	return f
}

func withTargetingRule(rule string) v1beta1.Flag {
	return flagWith(func(f *v1beta1.Flag) { f.Targeting = json.RawMessage(rule) })
}

// semanticNegativeCases are flag sets the validator rejects, each with the
// message it gives. They are listed on the admission issue.
var semanticNegativeCases = []struct {
	name       string
	flags      map[string]v1beta1.Flag
	evaluators string
	metadata   string
	want       string
	// warning: flagd loads it (and the OpenFeature Operator admits it), so
	// it is a warning, not an error.
	warning bool
}{
	{name: "state neither ENABLED nor DISABLED",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.State = "ON" })},
		want:  `spec.flagSpec.flags[f].state: Unsupported value: "ON": supported values: "ENABLED", "DISABLED"`},
	{name: "no variants",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = nil })},
		want:  `spec.flagSpec.flags[f].variants: Required value: a flag needs at least one variant`},
	{name: "empty variants",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = json.RawMessage(`{}`) })},
		want:  `spec.flagSpec.flags[f].variants: Required value: a flag needs at least one variant`},
	{name: "variants an array",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = json.RawMessage(`[true,false]`) })},
		want:  `spec.flagSpec.flags[f].variants: Invalid value: "[true,false]": must be a JSON object of variant name to value`},
	{name: "empty variant name",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = json.RawMessage(`{"":true,"off":false}`) })},
		want:  `spec.flagSpec.flags[f].variants[]: Invalid value: "": a variant name must not be empty`},
	{name: "defaultVariant not a variant",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.DefaultVariant = "blue" })},
		want:  `spec.flagSpec.flags[f].defaultVariant: Invalid value: "blue": must be one of the variants: off, on`},
	{name: "empty defaultVariant", warning: true,
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.DefaultVariant = "" })},
		want:  `spec.flagSpec.flags[f].defaultVariant: Invalid value: "": is empty: flagd evaluates the flag to an error`},
	{name: "variants of two types",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = json.RawMessage(`{"on":true,"off":"false"}`) })},
		want:  `spec.flagSpec.flags[f].variants[on]: Invalid value: "true": all variants of a flag must have one type: "on" is boolean but "off" is string`},
	{name: "null variant",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = json.RawMessage(`{"on":null,"off":false}`) })},
		want:  `spec.flagSpec.flags[f].variants[on]: Invalid value: "null": a variant must have a value`},
	{name: "array variant",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Variants = json.RawMessage(`{"on":[1],"off":[2]}`) })},
		want:  `spec.flagSpec.flags[f].variants[off]: Invalid value: "[2]": a variant value must be a boolean, string, number or object, not an array`},
	{name: "targeting a string",
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`"on"`)},
		want:  `spec.flagSpec.flags[f].targeting: Invalid value: "\"on\"": must be a JSON object`},
	{name: "$ref to a missing evaluator", warning: true,
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"$ref":"is-admin"},"on","off"]}`)},
		want:  `spec.flagSpec.flags[f].targeting: Invalid value: "is-admin": $ref "is-admin" does not name an entry of $evaluators`},
	{name: "unknown operator",
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"startsWith":[{"var":"email"},"admin"]},"on","off"]}`)},
		want:  `spec.flagSpec.flags[f].targeting: Invalid value: "{\"if\":[{\"startsWith\":[{\"var\":\"email\"},\"admin\"]},\"on\",\"off\"]}": unknown operator "startsWith"; flagd knows`},
	{name: "two operators in one rule", warning: true,
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"==":[1,1],"!=":[1,2]},"on","off"]}`)},
		want:  `a rule object names exactly one operator, found !=, ==`},
	{name: "$ref with another key",
		evaluators: `{"is-admin":{"==":[{"var":"role"},"admin"]}}`,
		flags:      map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"$ref":"is-admin","var":"x"},"on","off"]}`)},
		want:       `spec.flagSpec.flags[f].targeting: Invalid value: "{\"if\":[{\"$ref\":\"is-admin\",\"var\":\"x\"},\"on\",\"off\"]}": a $ref object takes no other key, found $ref, var`},
	{name: "if returns a variant the flag does not have", warning: true,
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"==":[{"var":"tier"},"gold"]},"onn","off"]}`)},
		want:  `spec.flagSpec.flags[f].targeting: Invalid value: "onn": targeting can return variant "onn", which the flag does not have (variants: off, on)`},
	{name: "fractional bucket that is not a variant", warning: true,
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"fractional":[["on",50],["of",50]]}`)},
		want:  `spec.flagSpec.flags[f].targeting: Invalid value: "of": targeting can return variant "of", which the flag does not have (variants: off, on)`},
	{name: "negative fractional weight", warning: true,
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"fractional":[["on",-10],["off",110]]}`)},
		want:  `fractional weight of on must not be negative, got -10`},
	{name: "$evaluators not an object",
		evaluators: `["is-admin"]`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.$evaluators: Invalid value: "[\"is-admin\"]": must be a JSON object`},
	{name: "evaluator not a rule object", warning: true,
		evaluators: `{"is-admin":"admin"}`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.$evaluators[is-admin]: Invalid value: "\"admin\"": an evaluator should be a JSON object (a targeting rule)`},
	{name: "evaluator with an unknown operator", warning: true,
		evaluators: `{"is-admin":{"equals":[{"var":"role"},"admin"]}}`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.$evaluators[is-admin]: Invalid value: "{\"equals\":[{\"var\":\"role\"},\"admin\"]}": unknown operator "equals"`},
	{name: "evaluator with a $ref to a missing evaluator", warning: true,
		evaluators: `{"is-staff":{"or":[{"$ref":"is-admin"},{"$ref":"is-dev"}]},"is-dev":{"==":[{"var":"role"},"dev"]}}`,
		flags:      map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want:       `spec.flagSpec.$evaluators[is-staff]: Invalid value: "is-admin": $ref "is-admin" does not name an entry of $evaluators`},
	{name: "empty evaluator name", warning: true,
		evaluators: `{"":{"==":[1,1]}}`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.$evaluators[]: Invalid value: "": an evaluator name should not be empty`},
	{name: "flag-set metadata not an object",
		metadata: `"v1"`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.metadata: Invalid value: "\"v1\"": must be a JSON object`},
	{name: "empty flag key",
		flags: map[string]v1beta1.Flag{"": flagWith(func(*v1beta1.Flag) {})},
		want:  `spec.flagSpec.flags[]: Invalid value: "": a flag key must not be empty`},
	{name: "flag metadata value that is an object (schema)",
		flags: map[string]v1beta1.Flag{"f": flagWith(func(f *v1beta1.Flag) { f.Metadata = json.RawMessage(`{"owner":{"team":"shop"}}`) })},
		want:  `spec.flagSpec.flags[f].metadata[owner]: Invalid value: "{\"team\":\"shop\"}": does not match flagd's flag schema (flagd-schemas v0.2.13) at /flags/f/metadata/owner: got object, want boolean or number or string`},
	{name: "flag-set metadata value that is an array (schema)", warning: true,
		metadata: `{"version":["1"]}`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.metadata[version]: Invalid value: "[\"1\"]": does not match flagd's flag schema (flagd-schemas v0.2.13) at /metadata/version: got array, want boolean or number or string`},
	{name: "sem_ver with a version that is not semantic (schema)",
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"sem_ver":[{"var":"version"},">=","1.0"]},"on","off"]}`)},
		want:  `spec.flagSpec.flags[f].targeting.if[0].sem_ver[2]: Invalid value: "\"1.0\"": does not match flagd's flag schema (flagd-schemas v0.2.13) at /flags/f/targeting/if/0/sem_ver/2`},
	{name: "var of an unknown $flagd property (schema)",
		flags: map[string]v1beta1.Flag{"f": withTargetingRule(`{"if":[{"==":[{"var":"$flagd.region"},"eu"]},"on","off"]}`)},
		want:  `does not match flagd's flag schema (flagd-schemas v0.2.13) at /flags/f/targeting/if/0/==/0/var`},
	{name: "starts_with with a number (schema)", warning: true,
		evaluators: `{"is-admin":{"starts_with":[{"var":"email"},1]}}`, flags: map[string]v1beta1.Flag{"f": flagWith(func(*v1beta1.Flag) {})},
		want: `spec.flagSpec.$evaluators[is-admin].starts_with[1]: Invalid value: "1": does not match flagd's flag schema (flagd-schemas v0.2.13) at /$evaluators/is-admin/starts_with/1`},
}

func TestValidateFlagSpecNegativeCases(t *testing.T) {
	if len(semanticNegativeCases) < 20 {
		t.Fatalf("want at least 20 negative cases, have %d", len(semanticNegativeCases))
	}
	for _, tc := range semanticNegativeCases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := &v1beta1.FlagSpec{Flags: tc.flags}
			if tc.evaluators != "" {
				spec.Evaluators = json.RawMessage(tc.evaluators)
			}
			if tc.metadata != "" {
				spec.Metadata = json.RawMessage(tc.metadata)
			}
			errs, warnings := ValidateFlagSpec(spec, field.NewPath("spec", "flagSpec"))
			if tc.warning {
				g.Expect(errs).To(BeEmpty(), "flagd loads it: a warning, not an error")
				errs = warnings
			} else {
				g.Expect(warnings).To(BeEmpty())
			}
			g.Expect(errs).To(HaveLen(1), "one mistake, one message: %v", errs.ToAggregate())
			g.Expect(errs.ToAggregate().Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestValidateFlagSpecAcceptsWhatFlagdAccepts: valid flag sets of every
// type, with the targeting features flagd documents, raise nothing.
func TestValidateFlagSpecAcceptsWhatFlagdAccepts(t *testing.T) {
	spec := &v1beta1.FlagSpec{
		Evaluators: json.RawMessage(`{"is-admin":{"starts_with":[{"var":"email"},"admin@"]},
			"is-staff":{"or":[{"$ref":"is-admin"},{"ends_with":[{"var":"email"},"@example.com"]}]}}`),
		Metadata: json.RawMessage(`{"flagSetId":"shop","version":"3","team":"checkout","critical":true,"rev":4}`),
		Flags: map[string]v1beta1.Flag{
			"bool": withTargetingRule(`{"if":[{"$ref":"is-staff"},"on",null]}`),
			"str": {State: "ENABLED", Variants: json.RawMessage(`{"red":"#f00","blue":"#00f"}`), DefaultVariant: "red",
				Targeting: json.RawMessage(`{"fractional":[{"cat":[{"var":"$flagd.flagKey"},{"var":"user.id"}]},["red",50],["blue",50]]}`),
				Metadata:  json.RawMessage(`{"owner":"ui"}`)},
			"num": {State: "DISABLED", Variants: json.RawMessage(`{"low":1,"high":2.5}`), DefaultVariant: "low",
				Targeting: json.RawMessage(`{"if":[{"sem_ver":[{"var":"version"},">=","1.2.0"]},"high","low"]}`)},
			"obj": {State: "ENABLED", Variants: json.RawMessage(`{"a":{"x":1},"b":{"y":[1,2]}}`), DefaultVariant: "a",
				Targeting: json.RawMessage(`{"if":[{"in":[{"var":"country"},["de","fr"]]},"b",{"if":[{">":[{"var":"age"},18]},"a"]}]}`)},
			"empty-targeting": flagWith(func(f *v1beta1.Flag) { f.Targeting = json.RawMessage(`{}`) }),
			"var-result":      withTargetingRule(`{"var":"variant"}`),
		},
	}
	errs, warnings := ValidateFlagSpec(spec, field.NewPath("spec", "flagSpec"))
	NewWithT(t).Expect(errs).To(BeEmpty())
	NewWithT(t).Expect(warnings).To(BeEmpty())
}

// FuzzValidateFlagSpecJSON: whatever JSON a FeatureFlag's spec.flagSpec
// holds, validation returns (it never panics), within the webhook's
// timeout, and is deterministic.
func FuzzValidateFlagSpecJSON(f *testing.F) {
	f.Add(`{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on","targeting":{"if":[{"$ref":"x"},"on","off"]}}},"$evaluators":{"x":{"==":[1,1]}}}`)
	f.Add(`{"flags":{"f":{"state":"ENABLED","variants":{"a":1},"defaultVariant":"a","targeting":{"fractional":[["a",-1],[]]}}},"metadata":{"x":[]}}`)
	f.Add(`{"flags":{"":{"variants":{"":null}}},"$evaluators":{"":{"$ref":{}}}}`)
	f.Add(`{"flags":{"f":{"state":"ENABLED","variants":{"a":"x"},"defaultVariant":"a","targeting":{"if":[{"sem_ver":[1,"~",{"var":"$flagd.timestamp"}]},[],{"if":[]}]}}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var spec v1beta1.FlagSpec
		if json.Unmarshal([]byte(doc), &spec) != nil {
			return
		}
		start := time.Now()
		first, firstW := ValidateFlagSpec(&spec, field.NewPath("spec", "flagSpec"))
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("validation took %v, more than the webhook's timeout (5s)", took)
		}
		second, secondW := ValidateFlagSpec(&spec, field.NewPath("spec", "flagSpec"))
		if fmt.Sprint(first, firstW) != fmt.Sprint(second, secondW) {
			t.Fatalf("not deterministic:\n%v %v\n%v %v", first, firstW, second, secondW)
		}
	})
}
