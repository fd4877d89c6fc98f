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
	count := func(err error) func() error { return func() error { calls++; return err } }
	spec := func(def string) *v1beta1.FlagSpec {
		return &v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"f": {State: "ENABLED", DefaultVariant: def}}}
	}

	g.Expect(c.validate(spec("a"), count(nil))).To(Succeed())
	g.Expect(c.validate(spec("a"), count(nil))).To(Succeed())
	g.Expect(calls).To(Equal(1), "same content: remembered")

	bad := fmt.Errorf("bad")
	g.Expect(c.validate(spec("b"), count(bad))).To(MatchError(bad))
	g.Expect(calls).To(Equal(2), "other content: computed")

	g.Expect(c.validate(spec("c"), count(nil))).To(Succeed())
	g.Expect(c.validate(spec("a"), count(nil))).To(Succeed())
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
			_ = ValidateFlagSpec(&ff.Spec.FlagSpec, nil)
		}
	})
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ValidateFlagSet(ff)
		}
	})
}
