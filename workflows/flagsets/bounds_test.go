package flagsets

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestRuleSize(t *testing.T) {
	for _, tc := range []struct {
		raw           string
		depth, values int
	}{
		{``, 0, 0},
		{`true`, 0, 1},
		{`"a,[{"`, 0, 1},
		{`[]`, 1, 1},
		{`{}`, 1, 1},
		{` [ 1 , [ ] ] `, 2, 3},
		{`{"a":[1,{"b":"x,]}\"\\"}]}`, 3, 5},
		{`{"if":[{"in":["@x",{"var":"email"}]},"on","off"]}`, 5, 9},
	} {
		depth, values := ruleSize([]byte(tc.raw))
		NewWithT(t).Expect([]int{depth, values}).To(Equal([]int{tc.depth, tc.values}), tc.raw)
	}
}

// decodedSize is ruleSize from the decoded value.
func decodedSize(v any) (depth, values int) {
	values = 1
	var children []any
	switch t := v.(type) {
	case map[string]any:
		for _, c := range t {
			children = append(children, c)
		}
	case []any:
		children = t
	default:
		return 0, 1
	}
	for _, c := range children {
		d, n := decodedSize(c)
		depth, values = max(depth, d), values+n
	}
	return depth + 1, values
}

// FuzzRuleSize: the scan of the bytes agrees with the decoded value.
func FuzzRuleSize(f *testing.F) {
	f.Add(`{"a":[1,{"b":"x,]}\"\\"}]}`)
	f.Add(` [ [], {}, "\u005d", -1.5e3, null, true ] `)
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		depth, values := ruleSize([]byte(raw))
		wantDepth, wantValues := decodedSize(v)
		if depth != wantDepth || values != wantValues {
			t.Fatalf("ruleSize(%q) = %d, %d; decoded: %d, %d", raw, depth, values, wantDepth, wantValues)
		}
	})
}

// nested is a rule of "!" operators depth levels deep.
func nested(depth int) string {
	return strings.Repeat(`{"!":`, depth) + "true" + strings.Repeat("}", depth)
}

// The bounds of what is judged: a rule deeper than MaxRuleDepth is an
// error of its flag (a warning of an evaluator, as every problem of one),
// and is left out of the schema layer; rules of more than MaxRuleValues
// values in all are one error, judged no further.
func TestRuleBounds(t *testing.T) {
	path := field.NewPath("spec", "flagSpec")
	withTargeting := func(rule string) v1beta1.Flag {
		f := boolFlag()
		f.Targeting = json.RawMessage(rule)
		return f
	}
	t.Run("at MaxRuleDepth a rule is judged", func(t *testing.T) {
		g := NewWithT(t)
		spec := &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"f": withTargeting(nested(MaxRuleDepth))}}
		errs, warnings := ValidateFlagSpec(spec, path)
		g.Expect(errs).To(BeEmpty())
		g.Expect(warnings).To(BeEmpty())
	})
	t.Run("deeper, its flag has an error that says how deep", func(t *testing.T) {
		g := NewWithT(t)
		spec := &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"f": withTargeting(nested(9990)), "g": boolFlag()}}
		errs, warnings := ValidateFlagSpec(spec, path)
		g.Expect(errs.ToAggregate()).To(MatchError(`spec.flagSpec.flags[f].targeting: Invalid value: "{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":{\"!\":...": ` +
			`nests 9990 levels deep, more than the 64 flagplane judges within the admission timeout`))
		g.Expect(warnings).To(BeEmpty())
	})
	t.Run("a deeper evaluator is a warning", func(t *testing.T) {
		g := NewWithT(t)
		spec := &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"f": boolFlag()}, Evaluators: json.RawMessage(`{"deep":` + nested(100) + `}`)}
		errs, warnings := ValidateFlagSpec(spec, path)
		g.Expect(errs).To(BeEmpty())
		g.Expect(warnings.ToAggregate()).To(MatchError(ContainSubstring(`spec.flagSpec.$evaluators[deep]: Invalid value: "{\"!\":`)))
		g.Expect(warnings.ToAggregate()).To(MatchError(ContainSubstring(`nests 100 levels deep, more than the 64`)))
	})
	t.Run("rules of MaxRuleValues values in all are judged, one more is one error", func(t *testing.T) {
		g := NewWithT(t)
		rule := func(n int) string { return `{"and":[` + strings.TrimSuffix(strings.Repeat("true,", n-2), ",") + `]}` }
		spec := &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"f": withTargeting(rule(MaxRuleValues / 2))},
			Evaluators: json.RawMessage(`{"e":` + rule(MaxRuleValues/2) + `}`)}
		errs, _ := ValidateFlagSpec(spec, path)
		g.Expect(errs).To(BeEmpty())
		spec.Flags["g"] = withTargeting(`{}`)
		errs, warnings := ValidateFlagSpec(spec, path)
		g.Expect(errs.ToAggregate()).To(MatchError(`spec.flagSpec: Too many: 50001: the targeting rules and $evaluators hold 50001 JSON values, ` +
			`more than the 50000 flagplane judges within the admission timeout: split the flag set into smaller FeatureFlags`))
		g.Expect(warnings).To(BeEmpty())
	})
}

// The error of a rendering names at most maxReported problems, each at
// most maxReportedBytes long, and counts the others: status carries it.
func TestRenderedErrIsBounded(t *testing.T) {
	g := NewWithT(t)
	flags := map[string]v1beta1.Flag{}
	variants := map[string]bool{}
	for i := range 500 {
		variants[fmt.Sprintf("v\u200f%d", i)] = true
	}
	many, _ := json.Marshal(variants)
	for i := range 25 {
		flags[fmt.Sprintf("f%04d", i)] = v1beta1.Flag{State: "ENABLED", Variants: many, DefaultVariant: "nope", Targeting: json.RawMessage(`{"if":[true,"x","y"]}`)}
	}
	for _, strict := range []bool{false, true} {
		r := NewValidator(strict).Rendering(flagSet(flags, ""))
		msg := r.Err.Error()
		g.Expect(msg).To(HavePrefix(`[spec.flagSpec.flags[f0000].defaultVariant: Invalid value: "nope": must be one of the variants: v`))
		g.Expect(msg).To(ContainSubstring(", and 5 more]"))
		g.Expect(len(msg)).To(BeNumerically("<", (maxReported+1)*(maxReportedBytes+10)), "a condition holds 32768")
		g.Expect(utf8.ValidString(msg)).To(BeTrue())
	}

	warned := map[string]v1beta1.Flag{}
	for i := range 1000 {
		f := boolFlag()
		f.DefaultVariant = ""
		warned[fmt.Sprintf("f%04d", i)] = f
	}
	r := NewValidator(true).Rendering(flagSet(warned, ""))
	g.Expect(r.Warnings).To(HaveLen(1000), "the warnings themselves are all kept")
	g.Expect(r.Err).To(MatchError(HaveSuffix(", and 980 more")))
}

// A message lists at most maxListed names and counts the others.
func TestMessagesListAFewNames(t *testing.T) {
	g := NewWithT(t)
	variants := map[string]int{}
	var buckets []string
	for i := range 1000 {
		variants[fmt.Sprintf("v%03d", i)] = i
		if i > 0 && i < 900 {
			buckets = append(buckets, fmt.Sprintf(`["v%03d",1]`, i))
		}
	}
	raw, _ := json.Marshal(variants)
	spec := &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{
		"bad":         {State: "ENABLED", Variants: raw, DefaultVariant: "nope"},
		"unreachable": {State: "ENABLED", Variants: raw, DefaultVariant: "v000", Targeting: json.RawMessage(`{"fractional":[` + strings.Join(buckets, ",") + `]}`)},
		"misspelt":    {State: "ENABLED", Variants: raw, DefaultVariant: "v000", Targeting: json.RawMessage(`{"if":[true,"nope","v001"]}`)},
	}}
	errs, warnings := ValidateFlagSpec(spec, field.NewPath("spec"))
	g.Expect(errs.ToAggregate()).To(MatchError(`spec.flags[bad].defaultVariant: Invalid value: "nope": must be one of the variants: ` +
		`v000, v001, v002, v003, v004, v005, v006, v007, v008, v009, v010, v011, v012, v013, v014, v015, v016, v017, v018, v019 and 980 more`))
	g.Expect(fieldMessages(warnings)).To(ConsistOf(
		ContainSubstring(`(variants: v000, v001, v002, v003, v004, v005, v006, v007, v008, v009, v010, v011, v012, v013, v014, v015, v016, v017, v018, v019 and 980 more)`),
		`spec.flags[unreachable].variants: Invalid value: "v900, v901, v902, v903, v904, v905, v906, v907, v908, v909, v910, v911, v912, v913, v914, v915, v916, v917, v918, v919 and 80 more": `+
			`can never be served: the targeting returns only "v001", "v002", "v003", "v004", "v005", "v006", "v007", "v008", "v009", "v010", "v011", "v012", "v013", "v014", "v015", "v016", "v017", "v018", "v019", "v020" and 879 more and the defaultVariant is "v000"`,
	))
}
