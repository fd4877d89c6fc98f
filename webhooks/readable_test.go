package webhooks

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// A refusal names at most maxCauses errors and counts the others; fields,
// values, reasons and warnings are shortened, and the characters of users'
// keys that a terminal acts on are escaped.
func TestInvalidIsReadable(t *testing.T) {
	g := NewWithT(t)
	var errs field.ErrorList
	value, variants := strings.Repeat("x", 300<<10), strings.Repeat(", v", 1000)
	for i := range 20000 {
		key := fmt.Sprintf("f\u200f%d\x00", i)
		errs = append(errs, field.Invalid(field.NewPath("spec", "flagSpec", "flags").Key(key).Child("variants"),
			value, "must be one of the variants: "+key+variants))
	}
	warnings := []string{"a NUL\x00, an escape\x1b[31m, an RTL override \u202e, invalid UTF-8 \xff, an emoji \U0001f6a9", strings.Repeat("w", 8<<10)}
	resp := invalid(v1beta1.FeatureFlagKind, strings.Repeat("n", 1000), errs, warnings)
	g.Expect(resp.Allowed).To(BeFalse())
	g.Expect(len(resp.Result.Message)).To(BeNumerically("<", 32<<10))
	g.Expect(resp.Result.Message).To(HavePrefix(`FeatureFlag.core.openfeature.dev "nnnn`))
	g.Expect(resp.Result.Message).To(ContainSubstring(`spec.flagSpec.flags[f\u200f0\u0000].variants: Invalid value: "xxxx`))
	g.Expect(resp.Result.Message).To(HaveSuffix(`spec: Too many: 20000: 20000 errors in all, the first 20 above]`))
	g.Expect(resp.Result.Details.Causes).To(HaveLen(maxCauses + 1))
	g.Expect(resp.Warnings).To(Equal([]string{
		`a NUL\u0000, an escape\u001b[31m, an RTL override \u202e, invalid UTF-8 \xff, an emoji ` + "\U0001f6a9",
		strings.Repeat("w", maxWarningBytes) + "...",
	}))
}

// A warning's value is shortened before it is printed, so that its reason
// is not cut off.
func TestWarningsKeepTheirReason(t *testing.T) {
	g := NewWithT(t)
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = "shop", "unread"
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "on",
		Targeting: []byte(`{"if":[{"$ref":"` + strings.Repeat("r", 8<<10) + `"},"on","off"]}`)}}
	resp := (&FlagSetValidator{}).Handle(t.Context(), admissionOf(t, admissionv1.Create, ff, nil))
	g.Expect(resp.Allowed).To(BeTrue())
	g.Expect(resp.Warnings).To(ConsistOf(And(HavePrefix(`spec.flagSpec.flags[f].targeting: Invalid value: "rrrr`), HaveSuffix(`r..." does not name an entry of $evaluators: flagd evaluates the flag to an error`))))
}
