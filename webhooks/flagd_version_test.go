package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/injection"
)

// TestFlagSetValidatorFlagdVersions: a flag set that an injected flagd
// release evaluates otherwise than v0.16.0 is admitted with a warning per
// flag and behaviour, also when strict or with validation off; one that
// the releases evaluate alike gets none.
func TestFlagSetValidatorFlagdVersions(t *testing.T) {
	ctx := context.Background()
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"beta":  {State: "DISABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off"},
		"split": {State: "ENABLED", Variants: json.RawMessage(`{"a":"a","b":"b"}`), DefaultVariant: "a", Targeting: json.RawMessage(`{"fractional":[["a",50],["b",50]]}`)},
		"plain": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"},
	}
	opts := DefaultOptions()
	opts.Injection.Sidecar.Tag = "v0.15.4"
	opts.FlagdTag = "0.15.4"
	releases := opts.Flagd()
	want := []string{
		"spec.flagSpec.flags[beta]: DISABLED: flagd v0.15.4 (--sidecar-tag, --flagd-tag) answers its evaluations with the error FLAG_NOT_FOUND",
		"spec.flagSpec.flags[split]: fractional with an empty targetingKey: the rule buckets by the targetingKey",
	}
	for _, tc := range []struct {
		name string
		v    *FlagSetValidator
	}{
		{"validated", &FlagSetValidator{Flagd: releases}},
		{"strict", &FlagSetValidator{Strict: true, Flagd: releases}},
		{"validation off", &FlagSetValidator{Disabled: true, Flagd: releases}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := tc.v.Handle(ctx, admissionOf(t, admissionv1.Create, ff, nil))
			g.Expect(resp.Allowed).To(BeTrue())
			g.Expect(resp.Warnings).To(HaveExactElements(HavePrefix(want[0]), HavePrefix(want[1])))
		})
	}
	t.Run("the default release: no warning", func(t *testing.T) {
		g := NewWithT(t)
		resp := (&FlagSetValidator{Flagd: DefaultOptions().Flagd()}).Handle(ctx, admissionOf(t, admissionv1.Create, ff, nil))
		g.Expect(resp.Allowed).To(BeTrue())
		g.Expect(resp.Warnings).To(BeEmpty())
	})
	t.Run("a release flagplane does not vouch for: no semantic warning", func(t *testing.T) {
		g := NewWithT(t)
		o := DefaultOptions()
		o.Injection.Sidecar.Tag = "latest"
		resp := (&FlagSetValidator{Flagd: o.Flagd()}).Handle(ctx, admissionOf(t, admissionv1.Create, ff, nil))
		g.Expect(resp.Warnings).To(BeEmpty())
	})
	t.Run("two releases: each says its own", func(t *testing.T) {
		g := NewWithT(t)
		o := DefaultOptions()
		o.Injection.Sidecar.Tag, o.FlagdTag = "v0.16.0", "v0.15.4"
		resp := (&FlagSetValidator{Flagd: o.Flagd()}).Handle(ctx, admissionOf(t, admissionv1.Create, ff, nil))
		g.Expect(resp.Warnings).To(HaveExactElements(
			HavePrefix("spec.flagSpec.flags[beta]: DISABLED: flagd v0.15.4 (--flagd-tag) answers"),
			ContainSubstring("flagd v0.15.4 (--flagd-tag) buckets it by the flag key alone")))
	})
	t.Run("many flags: the warnings are bounded", func(t *testing.T) {
		g := NewWithT(t)
		many := ff.DeepCopy()
		for i := range 30 {
			many.Spec.FlagSpec.Flags[fmt.Sprintf("off-%02d", i)] = ff.Spec.FlagSpec.Flags["beta"]
		}
		resp := (&FlagSetValidator{Flagd: releases}).Handle(ctx, admissionOf(t, admissionv1.Create, many, nil))
		g.Expect(resp.Warnings).To(HaveLen(maxVersionWarnings + 1))
		g.Expect(resp.Warnings[maxVersionWarnings]).To(Equal("and 12 more flags that the injected flagd evaluates otherwise than flagd v0.16.0"))
	})
}

// TestOptionsFlagd: the releases admission warns for.
func TestOptionsFlagd(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	g.Expect(o.Flagd()).To(HaveExactElements(HaveField("Facts.Version", flagdversion.Reference)))
	o.FlagdTag = "v0.14.5"
	g.Expect(o.Flagd()).To(HaveLen(2))
	g.Expect(o.Flagd()[1].Setting).To(Equal("--flagd-tag"))
	g.Expect(o.Injection.Sidecar.TagSetting).To(BeEmpty())
	g.Expect(o.Flagd()[0].Setting).To(Equal(injection.DefaultTagSetting))
}
