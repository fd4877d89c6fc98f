package flagsets

import (
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

func flagSet(flags map[string]v1beta1.Flag, evaluators string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = "shop", "flags"
	ff.Spec.FlagSpec.Flags = flags
	if evaluators != "" {
		ff.Spec.FlagSpec.Evaluators = json.RawMessage(evaluators)
	}
	return ff
}

func boolFlag() v1beta1.Flag {
	return v1beta1.Flag{State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"}
}

func TestValidate(t *testing.T) {
	withTargeting := func(rule string) v1beta1.Flag {
		f := boolFlag()
		f.Targeting = json.RawMessage(rule)
		return f
	}
	cases := []struct {
		name       string
		flags      map[string]v1beta1.Flag
		evaluators string
		wantErr    string // substring; empty means valid
		// wantWarning: valid (flagd loads it) but with this warning.
		wantWarning string
	}{
		{name: "valid boolean flag", flags: map[string]v1beta1.Flag{"f": boolFlag()}},
		{name: "empty flag set", flags: map[string]v1beta1.Flag{}},
		{name: "object variants", flags: map[string]v1beta1.Flag{"f": {State: "DISABLED",
			Variants: json.RawMessage(`{"a":{"x":1},"b":{"y":2}}`), DefaultVariant: "b"}}},
		{name: "valid $ref", evaluators: `{"is-admin":{"in":["admin",{"var":"role"}]}}`,
			flags: map[string]v1beta1.Flag{"f": withTargeting(`{"if":[{"$ref":"is-admin"},"on","off"]}`)}},
		{name: "bad state", flags: map[string]v1beta1.Flag{"f": {State: "ON", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "on"}},
			wantErr: `spec.flagSpec.flags[f].state: Unsupported value: "ON"`},
		{name: "default variant not among variants", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED",
			Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "blue"}},
			wantErr: `spec.flagSpec.flags[f].defaultVariant: Invalid value: "blue": must be one of the variants: off, on`},
		{name: "missing variants", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED", DefaultVariant: "on"}},
			wantErr: `spec.flagSpec.flags[f].variants: Required value`},
		{name: "empty variants", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{}`), DefaultVariant: "on"}},
			wantErr: `spec.flagSpec.flags[f].variants: Required value`},
		{name: "variants not an object", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`[true]`), DefaultVariant: "on"}},
			wantErr: `must be a JSON object of variant name to value`},
		{name: "mixed variant types", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED",
			Variants: json.RawMessage(`{"on":true,"off":"no"}`), DefaultVariant: "on"}},
			wantErr: `all variants of a flag must have one type: "on" is boolean but "off" is string`},
		{name: "null variant", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED",
			Variants: json.RawMessage(`{"on":null}`), DefaultVariant: "on"}},
			wantErr: `a variant must have a value`},
		{name: "unknown $ref: loaded by flagd, admitted by the OpenFeature Operator", flags: map[string]v1beta1.Flag{"f": withTargeting(`{"if":[{"$ref":"nope"},"on","off"]}`)},
			wantWarning: `$ref "nope" does not name an entry of $evaluators`},
		{name: "unreachable variants", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED",
			Variants: json.RawMessage(`{"a":"a","b":"b","c":"c","d":"d"}`), DefaultVariant: "a",
			Targeting: json.RawMessage(`{"if":[{"==":[{"var":"tier"},"gold"]},"b",null]}`)}},
			wantWarning: `spec.flagSpec.flags[f].variants: Invalid value: "c, d": can never be served: the targeting returns only "b" and the defaultVariant is "a"`},
		{name: "variants a var can return are not unreachable", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED",
			Variants: json.RawMessage(`{"a":"a","b":"b","c":"c"}`), DefaultVariant: "a",
			Targeting: json.RawMessage(`{"if":[{"==":[{"var":"tier"},"gold"]},{"var":"variant"},"b"]}`)}}},
		{name: "a flag without targeting switches by defaultVariant: no unreachable variant", flags: map[string]v1beta1.Flag{"f": {State: "ENABLED",
			Variants: json.RawMessage(`{"a":"a","b":"b","c":"c"}`), DefaultVariant: "a"}}},
		{name: "empty evaluator: flagd refuses the flag set", evaluators: `{"x":{}}`, flags: map[string]v1beta1.Flag{"f": boolFlag()},
			wantErr: `spec.flagSpec.$evaluators[x]: Invalid value: "{}": flagd refuses an empty evaluator`},
		// The OpenFeature Operator's own e2e "good" flag set: admitted, with warnings.
		{name: "OpenFeature Operator e2e featureflag_good", flags: map[string]v1beta1.Flag{"fibAlgo": {State: "ENABLED",
			Variants: json.RawMessage(`{"recursive":"recursive","memo":"memo","loop":"loop","binet":"binet"}`), DefaultVariant: "recursive",
			Targeting: json.RawMessage(`{"if":[{"$ref":"emailWithFaas"},"binet",null]}`)}},
			wantWarning: `$ref "emailWithFaas" does not name an entry of $evaluators`},
		// ... and its "bad" one: refused, as the OpenFeature Operator refuses it (flagd's schema).
		{name: "OpenFeature Operator e2e featureflag_bad", flags: map[string]v1beta1.Flag{"fibAlgo": {State: "ENABLED",
			Variants: json.RawMessage(`{"recursive":"recursive","memo":"memo","loop":"loop","binet":"binet"}`), DefaultVariant: "recursive",
			Targeting: json.RawMessage(`{"fractional":["invalid",["clubs",25],["diamonds",25],["hearts",25],["spades",25]]}`)}},
			wantErr: `does not match flagd's flag schema`},
		{name: "targeting not an object", flags: map[string]v1beta1.Flag{"f": withTargeting(`"on"`)},
			wantErr: `spec.flagSpec.flags[f].targeting: Invalid value: "\"on\"": must be a JSON object`},
		{name: "evaluators not an object", evaluators: `[1]`, flags: map[string]v1beta1.Flag{"f": boolFlag()},
			wantErr: `spec.flagSpec.$evaluators`},
		{name: "every bad flag is named", flags: map[string]v1beta1.Flag{
			"a": {State: "X", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "on"},
			"b": {State: "ENABLED", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "off"},
		}, wantErr: `[spec.flagSpec.flags[a].state: Unsupported value: "X": supported values: "ENABLED", "DISABLED", spec.flagSpec.flags[b].defaultVariant`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ff := flagSet(tc.flags, tc.evaluators)
			r := NewValidator(false).Rendering(ff)
			err := r.Err
			if tc.wantWarning == "" && tc.wantErr == "" {
				g.Expect(r.Warnings).To(BeEmpty())
			} else if tc.wantWarning != "" {
				g.Expect(r.Warnings).To(ContainElement(ContainSubstring(tc.wantWarning)))
			}
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func FuzzValidateFlagSpec(f *testing.F) {
	f.Add(`{"on":true,"off":false}`, "on", `{"if":[{"$ref":"x"},"on","off"]}`, `{"x":{"==":[1,1]}}`)
	f.Add(`[]`, "", `"x"`, `null`)
	f.Fuzz(func(t *testing.T, variants, def, targeting, evaluators string) {
		ff := flagSet(map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(variants),
			DefaultVariant: def, Targeting: json.RawMessage(targeting)}}, evaluators)
		_ = NewValidator(true).Rendering(ff) // must not panic, whatever the input
	})
}

// A flag set is rendered whether or not it is valid: its revision is what
// its status reports, and its consumers keep their last valid content.
func TestRendering(t *testing.T) {
	g := NewWithT(t)
	ff := flagSet(map[string]v1beta1.Flag{"f": boolFlag()}, "")
	r := NewValidator(false).Rendering(ff)
	content, revision, err := Serve(ff)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(Equal(topology.Rendered{Content: content, Revision: revision, Size: len(content)}))
	g.Expect(r.Valid()).To(BeTrue())
	rendered, err := Render(ff)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(revision).To(Equal(Revision(rendered)), "the revision is the hash of the flag set as written")

	f := boolFlag()
	f.DefaultVariant = "blue"
	ff = flagSet(map[string]v1beta1.Flag{"f": f}, "")
	r = NewValidator(false).Rendering(ff)
	g.Expect(r.Err).To(MatchError(ContainSubstring("must be one of the variants")))
	g.Expect(r.Content).To(ContainSubstring(`"defaultVariant":"blue"`))
	g.Expect(ServedRevision(r.Content)).To(Equal(r.Revision))

	// What cannot be encoded cannot be served.
	f.Variants = json.RawMessage(`{`)
	ff = flagSet(map[string]v1beta1.Flag{"f": f}, "")
	r = NewValidator(false).Rendering(ff)
	g.Expect(r.Valid()).To(BeFalse())
	g.Expect(r.Content).To(BeEmpty())
	g.Expect(r.Revision).To(BeEmpty())
}

// Strict validation makes warnings errors; a strict and a lenient Validator
// find the same warnings. A nil Validator is a lenient one.
func TestStrictValidation(t *testing.T) {
	g := NewWithT(t)
	lenient, strict := NewValidator(false), NewValidator(true)
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`),
		DefaultVariant: "off", Targeting: json.RawMessage(`{"if":[{"$ref":"missing"},"on","off"]}`)}}
	l := lenient.Rendering(ff)
	g.Expect(l.Err).To(Succeed(), "flagd loads it: served")
	g.Expect(l.Warnings).To(ConsistOf(ContainSubstring(`$ref "missing" does not name an entry of $evaluators`)))
	s := strict.Rendering(ff)
	g.Expect(s.Err).To(MatchError(ContainSubstring(`$ref "missing"`)), "strict: not served")
	g.Expect(s.Warnings).To(Equal(l.Warnings))
	g.Expect(s.Content).To(Equal(l.Content))
	g.Expect(strict.Strict()).To(BeTrue())
	var none *Validator
	g.Expect(none.Rendering(ff)).To(Equal(l))
	g.Expect(none.Strict()).To(BeFalse())
	g.Expect(lenient.TopologyOptions()).To(HaveLen(1))
}

// BenchmarkRendering is what the topology computes once per edit of a flag
// set of 20 targeted flags.
func BenchmarkRendering(b *testing.B) {
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	for i := range 20 {
		ff.Spec.FlagSpec.Flags[fmt.Sprintf("flag-%d", i)] = v1beta1.Flag{State: "ENABLED",
			Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off",
			Targeting: json.RawMessage(`{"if":[{"in":["@example.com",{"var":"email"}]},"on","off"]}`)}
	}
	val := NewValidator(false)
	b.ReportAllocs()
	for b.Loop() {
		_ = val.Rendering(ff)
	}
}
