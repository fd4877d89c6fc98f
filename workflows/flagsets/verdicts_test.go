package flagsets

import (
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestVerdictCache(t *testing.T) {
	g := NewWithT(t)
	c := newVerdictCache(2)
	calls := 0
	count := func(err error) func() verdict { return func() verdict { calls++; return verdict{errs: err} } }
	spec := func(def string) *v1beta1.FlagSpec {
		return &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"f": {State: "ENABLED", DefaultVariant: def}}}
	}

	g.Expect(c.validate(spec("a"), count(nil)).errs).To(Succeed())
	g.Expect(c.validate(spec("a"), count(nil)).errs).To(Succeed())
	g.Expect(calls).To(Equal(1), "same content: remembered")

	bad := fmt.Errorf("bad")
	g.Expect(c.validate(spec("b"), count(bad)).errs).To(MatchError(bad))
	g.Expect(calls).To(Equal(2), "other content: computed")

	g.Expect(c.validate(spec("c"), count(nil)).errs).To(Succeed())
	g.Expect(c.validate(spec("a"), count(nil)).errs).To(Succeed())
	g.Expect(calls).To(Equal(4), "the oldest verdict was evicted past the bound")
}

// An edit in place (same object, same generation) must not get a stale verdict.
func TestValidateFollowsContent(t *testing.T) {
	g := NewWithT(t)
	val := NewValidator(false)
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "on"}}
	g.Expect(val.Validate(ff)).To(Succeed())
	f := ff.Spec.FlagSpec.Flags["f"]
	f.DefaultVariant = "off"
	ff.Spec.FlagSpec.Flags["f"] = f
	g.Expect(val.Validate(ff)).To(MatchError(ContainSubstring("defaultVariant")))
}

// Strict validation makes warnings errors: the verdict keeps both, so that
// a strict and a lenient Validator find the same problems. A nil Validator
// is a lenient one.
func TestStrictValidation(t *testing.T) {
	g := NewWithT(t)
	lenient, strict := NewValidator(false), NewValidator(true)
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`),
		DefaultVariant: "off", Targeting: json.RawMessage(`{"if":[{"$ref":"missing"},"on","off"]}`)}}
	g.Expect(lenient.Validate(ff)).To(Succeed(), "flagd loads it: served")
	g.Expect(lenient.Warnings(ff)).To(ConsistOf(ContainSubstring(`$ref "missing" does not name an entry of $evaluators`)))
	g.Expect(strict.Validate(ff)).To(MatchError(ContainSubstring(`$ref "missing"`)), "strict: not served")
	g.Expect(strict.Warnings(ff)).To(Equal(lenient.Warnings(ff)))
	g.Expect(strict.Strict()).To(BeTrue())
	var none *Validator
	g.Expect(none.Validate(ff)).To(Succeed())
	g.Expect(none.Warnings(ff)).To(Equal(lenient.Warnings(ff)))
	g.Expect(none.Strict()).To(BeFalse())
}

func BenchmarkValidate(b *testing.B) {
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	for i := range 20 {
		ff.Spec.FlagSpec.Flags[fmt.Sprintf("flag-%d", i)] = v1beta1.Flag{State: "ENABLED",
			Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off",
			Targeting: json.RawMessage(`{"if":[{"in":["@example.com",{"var":"email"}]},"on","off"]}`)}
	}
	b.Run("uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ValidateFlagSpec(&ff.Spec.FlagSpec, nil)
		}
	})
	val := NewValidator(false)
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = val.Validate(ff)
		}
	})
}
