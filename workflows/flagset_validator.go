package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// flagCheck is one rule about one flag. Checks run in order and a flag stops
// at its first failure, so that one mistake yields one message.
type flagCheck func(path *field.Path, key string, flag *v1beta1.Flag, ctx *flagSetContext) *field.Error

// flagSetContext carries what checks of single flags need from the whole set.
type flagSetContext struct {
	evaluators map[string]json.RawMessage
	variants   map[string]json.RawMessage // of the flag being checked
}

var flagChecks = []flagCheck{
	checkState,
	checkVariantsObject,
	checkVariantNames,
	checkDefaultVariant,
	checkVariantTypes,
	checkTargetingRefs,
	checkTargetingOperators,
	checkTargetingResults,
}

// ValidateFlagSet checks the rules a flag set must meet to be served that the
// CRD schema cannot express. It returns nil or an error whose message lists
// every problem, each naming the flag and the rule.
func ValidateFlagSet(ff *v1beta1.FeatureFlag) error {
	spec := &ff.Spec.FlagSpec
	return verdicts.validate(spec, func() error {
		if errs := ValidateFlagSpec(spec, field.NewPath("spec", "flagSpec")); len(errs) > 0 {
			return errs.ToAggregate()
		}
		return nil
	})
}

// ValidateFlagSpec returns the problems of a flag set: flag-set level ones
// first, then per flag in flag key order.
//
// Two layers run. First the semantic rules of this file, which the schema
// cannot express or expresses with unreadable messages: a chain of checks
// per flag that stops at the first failure (defaultVariant among the
// variants, one value type per flag, every $ref names an entry of
// $evaluators, targeting only uses operators flagd knows, every variant a
// rule can return exists, ...). Then flagd's own JSON schema (flagd-schemas,
// embedded, see flagset_validator_schema.go) for whatever the rules did not
// report already, so that a flag set that passes is one flagd accepts, and a
// flag gets one message, not two.
func ValidateFlagSpec(spec *v1beta1.FlagSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	reported := map[string]bool{} // schema owners (see schemaOwner) that have a message
	ctx := &flagSetContext{}
	if len(spec.Evaluators) > 0 {
		if err := decodeObject(spec.Evaluators, &ctx.evaluators); err != nil {
			errs = append(errs, field.Invalid(path.Child("$evaluators"), string(spec.Evaluators), "must be a JSON object"))
			reported[ownerEvaluators] = true
		}
	}
	if len(spec.Metadata) > 0 {
		var md map[string]json.RawMessage
		if err := decodeObject(spec.Metadata, &md); err != nil {
			errs = append(errs, field.Invalid(path.Child("metadata"), string(spec.Metadata), "must be a JSON object"))
			reported[ownerMetadata] = true
		}
	}
	for _, name := range sortedKeys(ctx.evaluators) {
		if err := checkEvaluator(path.Child("$evaluators").Key(name), name, ctx); err != nil {
			errs = append(errs, err)
			reported[ownerEvaluators+"/"+name] = true
		}
	}
	keys := make([]string, 0, len(spec.Flags))
	for k := range spec.Flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		flag := spec.Flags[key]
		ctx.variants = nil
		fpath := path.Child("flags").Key(key)
		if key == "" {
			errs = append(errs, field.Invalid(fpath, key, "a flag key must not be empty"))
			reported[ownerFlag(key)] = true
			continue
		}
		for _, check := range flagChecks {
			if err := check(fpath, key, &flag, ctx); err != nil {
				errs = append(errs, err)
				reported[ownerFlag(key)] = true
				break
			}
		}
	}
	return append(errs, schemaErrors(spec, path, reported)...)
}

func checkState(path *field.Path, _ string, flag *v1beta1.Flag, _ *flagSetContext) *field.Error {
	if flag.State != v1beta1.FlagStateEnabled && flag.State != v1beta1.FlagStateDisabled {
		return field.NotSupported(path.Child("state"), flag.State, []string{v1beta1.FlagStateEnabled, v1beta1.FlagStateDisabled})
	}
	return nil
}

func checkVariantsObject(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *field.Error {
	if len(flag.Variants) == 0 {
		return field.Required(path.Child("variants"), "a flag needs at least one variant")
	}
	if err := decodeObject(flag.Variants, &ctx.variants); err != nil {
		return field.Invalid(path.Child("variants"), string(flag.Variants), "must be a JSON object of variant name to value")
	}
	if len(ctx.variants) == 0 {
		return field.Required(path.Child("variants"), "a flag needs at least one variant")
	}
	return nil
}

func checkVariantNames(path *field.Path, _ string, _ *v1beta1.Flag, ctx *flagSetContext) *field.Error {
	if _, ok := ctx.variants[""]; ok {
		return field.Invalid(path.Child("variants").Key(""), "", "a variant name must not be empty")
	}
	return nil
}

func checkDefaultVariant(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *field.Error {
	if _, ok := ctx.variants[flag.DefaultVariant]; !ok {
		return field.Invalid(path.Child("defaultVariant"), flag.DefaultVariant,
			"must be one of the variants: "+strings.Join(sortedKeys(ctx.variants), ", "))
	}
	return nil
}

func checkVariantTypes(path *field.Path, _ string, _ *v1beta1.Flag, ctx *flagSetContext) *field.Error {
	var first, firstType string
	for _, name := range sortedKeys(ctx.variants) {
		t := jsonType(ctx.variants[name])
		switch t {
		case "null":
			return field.Invalid(path.Child("variants").Key(name), "null", "a variant must have a value")
		case "array":
			return field.Invalid(path.Child("variants").Key(name), string(ctx.variants[name]),
				"a variant value must be a boolean, string, number or object, not an array")
		}
		if first == "" {
			first, firstType = name, t
			continue
		}
		if t != firstType {
			return field.Invalid(path.Child("variants").Key(name), string(ctx.variants[name]),
				fmt.Sprintf("all variants of a flag must have one type: %q is %s but %q is %s", name, t, first, firstType))
		}
	}
	return nil
}

func checkTargetingRefs(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *field.Error {
	if len(flag.Targeting) == 0 {
		return nil
	}
	var rule any
	if err := json.Unmarshal(flag.Targeting, &rule); err != nil {
		return field.Invalid(path.Child("targeting"), string(flag.Targeting), "must be valid JSON")
	}
	if _, ok := rule.(map[string]any); !ok {
		return field.Invalid(path.Child("targeting"), string(flag.Targeting), "must be a JSON object")
	}
	for _, ref := range collectRefs(rule) {
		if _, ok := ctx.evaluators[ref]; !ok {
			return field.Invalid(path.Child("targeting"), ref,
				fmt.Sprintf("$ref %q does not name an entry of $evaluators", ref))
		}
	}
	return nil
}

// collectRefs returns every {"$ref": "name"} target in a JSONLogic rule.
func collectRefs(rule any) []string {
	var refs []string
	var walk func(any)
	walk = func(n any) {
		switch t := n.(type) {
		case map[string]any:
			if r, ok := t["$ref"].(string); ok {
				refs = append(refs, r)
			}
			for _, k := range sortedKeys(t) {
				walk(t[k])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(rule)
	return refs
}

func decodeObject(raw json.RawMessage, into *map[string]json.RawMessage) error {
	if t := jsonType(raw); t != "object" {
		return fmt.Errorf("got %s, want object", t)
	}
	return json.Unmarshal(raw, into)
}

// jsonType names the JSON type of a value: object, array, string, number, boolean or null.
func jsonType(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "null"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TopologyOptions are the options of every topology flagplane keeps: a flag
// set is valid when flagd can load it (ValidateFlagSet).
func TopologyOptions() topology.Options {
	return topology.Options{FlagSetValid: func(ff *v1beta1.FeatureFlag) bool { return ValidateFlagSet(ff) == nil }}
}
