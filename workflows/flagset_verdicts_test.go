package workflows

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
func TestValidateFlagSetFollowsContent(t *testing.T) {
	g := NewWithT(t)
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "on"}}
	g.Expect(ValidateFlagSet(ff)).To(Succeed())
	f := ff.Spec.FlagSpec.Flags["f"]
	f.DefaultVariant = "off"
	ff.Spec.FlagSpec.Flags["f"] = f
	g.Expect(ValidateFlagSet(ff)).To(MatchError(ContainSubstring("defaultVariant")))
}

// Strict validation makes warnings errors, read at every call: the cached
// verdict keeps both.
func TestStrictValidation(t *testing.T) {
	g := NewWithT(t)
	defer SetStrictValidation(false)
	ff := &v1beta1.FeatureFlag{}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`),
		DefaultVariant: "off", Targeting: json.RawMessage(`{"if":[{"$ref":"missing"},"on","off"]}`)}}
	g.Expect(ValidateFlagSet(ff)).To(Succeed(), "flagd loads it: served")
	g.Expect(FlagSetWarnings(ff)).To(ConsistOf(ContainSubstring(`$ref "missing" does not name an entry of $evaluators`)))
	SetStrictValidation(true)
	g.Expect(ValidateFlagSet(ff)).To(MatchError(ContainSubstring(`$ref "missing"`)), "strict: not served")
	SetStrictValidation(false)
	g.Expect(ValidateFlagSet(ff)).To(Succeed())
}

func BenchmarkValidateFlagSet(b *testing.B) {
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
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ValidateFlagSet(ff)
		}
	})
}
