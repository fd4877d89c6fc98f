package realclients

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// flagSetCase is a flag set with one flag, "f", and what flagplane's
// validation makes of it.
type flagSetCase struct {
	name       string
	flag       v1beta1.Flag
	evaluators string
	// loads: flagd v0.16 loads the flag set (its flag evaluates to
	// something other than FLAG_NOT_FOUND).
	loads bool
	// verdict: "error" (refused and not served), "warning" (served, with a
	// warning) or "" (clean).
	verdict string
}

func flagOf(variants, def, targeting string) v1beta1.Flag {
	f := v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(variants), DefaultVariant: def}
	if targeting != "" {
		f.Targeting = json.RawMessage(targeting)
	}
	return f
}

// The line between an error and a warning is what flagd does with the flag
// set: it refuses the whole set for a defaultVariant that is not a variant
// or an empty evaluator, and loads the rest (it only logs schema
// violations). Errors flagd would load are the OpenFeature Operator's
// refusals (flagd's schema on the flags); they are marked below.
var flagSetCases = []flagSetCase{
	{name: "clean", flag: flagOf(`{"on":true,"off":false}`, "off", `{"if":[{"==":[{"var":"tier"},"gold"]},"on","off"]}`),
		loads: true},
	{name: "defaultVariant not a variant", flag: flagOf(`{"on":true,"off":false}`, "blue", ""),
		loads: false, verdict: "error"},
	{name: "empty evaluator", flag: flagOf(`{"on":true,"off":false}`, "off", ""), evaluators: `{"x":{}}`,
		loads: false, verdict: "error"},
	{name: "unresolved $ref", flag: flagOf(`{"on":true,"off":false}`, "off", `{"if":[{"$ref":"missing"},"on","off"]}`),
		loads: true, verdict: "warning"},
	{name: "a result variant the flag does not have", flag: flagOf(`{"on":true,"off":false}`, "off", `{"fractional":[["on",50],["of",50]]}`),
		loads: true, verdict: "warning"},
	{name: "an unreachable variant", flag: flagOf(`{"a":"a","b":"b","c":"c"}`, "a", `{"if":[{"==":[{"var":"tier"},"gold"]},"b",null]}`),
		loads: true, verdict: "warning"},
	{name: "two operators in one rule", flag: flagOf(`{"on":true,"off":false}`, "off", `{"if":[{"==":[1,1],"!=":[1,2]},"on","off"]}`),
		loads: true, verdict: "warning"},
	{name: "a negative fractional weight", flag: flagOf(`{"on":true,"off":false}`, "off", `{"fractional":[["on",-10],["off",110]]}`),
		loads: true, verdict: "warning"},
	{name: "an evaluator with an unknown operator", flag: flagOf(`{"on":true,"off":false}`, "off", ""), evaluators: `{"x":{"equals":[1,1]}}`,
		loads: true, verdict: "warning"},
	// The OpenFeature Operator's refusals: flagd loads them.
	{name: "mixed variant types (flagd's schema)", flag: flagOf(`{"on":true,"off":"no"}`, "off", ""),
		loads: true, verdict: "error"},
	{name: "an unknown operator (flagd's schema)", flag: flagOf(`{"on":true,"off":false}`, "off", `{"if":[{"startsWith":[{"var":"email"},"a"]},"on","off"]}`),
		loads: true, verdict: "error"},
}

var _ = Describe("flagd, on the flag sets flagplane refuses and warns about", func() {
	It("refuses the whole flag set exactly where flagplane's validation has an error it cannot load, and loads every one it only warns about", func() {
		dir := GinkgoT().TempDir()
		var sources []map[string]string
		for i, c := range flagSetCases {
			spec := v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{fmt.Sprintf("f%d", i): c.flag}}
			if c.evaluators != "" {
				spec.Evaluators = json.RawMessage(c.evaluators)
			}
			errs, warnings := flagsets.ValidateFlagSpec(&spec, field.NewPath("spec", "flagSpec"))
			verdict := ""
			switch {
			case len(errs) > 0:
				verdict = "error"
			case len(warnings) > 0:
				verdict = "warning"
			}
			Expect(verdict).To(Equal(c.verdict), "%s: flagplane's verdict (errors %v, warnings %v)", c.name, errs, warnings)

			content, err := flagsets.Render(&v1beta1.FeatureFlag{Spec: v1beta1.FeatureFlagSpec{FlagSpec: spec}})
			Expect(err).NotTo(HaveOccurred())
			path := filepath.Join(dir, fmt.Sprintf("case%d.json", i))
			Expect(os.WriteFile(path, []byte(content), 0o644)).To(Succeed())
			sources = append(sources, map[string]string{"uri": path, "provider": "file"})
		}
		arg, err := json.Marshal(sources)
		Expect(err).NotTo(HaveOccurred())
		f := startFlagd("--sources", string(arg))
		kindOf := func(c flagSetCase) string {
			if c.name == "an unreachable variant" {
				return "String"
			}
			return "Boolean"
		}
		for i, c := range flagSetCases {
			if c.loads {
				Eventually(f.resolve(kindOf(c), fmt.Sprintf("f%d", i), map[string]any{"tier": "gold"})).
					ShouldNot(HaveField("Code", "not_found"), "%s: flagd loads it", c.name)
			}
		}
		// flagd has read every source by now: the refused ones stay unknown.
		for i, c := range flagSetCases {
			if !c.loads {
				Consistently(f.resolve(kindOf(c), fmt.Sprintf("f%d", i), nil), "2s").
					Should(HaveField("Code", "not_found"), "%s: flagd refuses the flag set", c.name)
			}
		}
	})
})
