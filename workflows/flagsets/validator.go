package flagsets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// The rules of a flag set come in two strengths.
//
//   - An error is what flagd cannot load (variants that are not an object, a
//     defaultVariant that is not one of them, an empty evaluator, metadata
//     that is not an object: flagd then refuses the whole flag set) or what
//     the OpenFeature Operator refuses (a flag that does not match flagd's
//     flag schema). A flag set with an error is refused on admission and, if
//     it got in, not served: workloads keep its last valid content.
//   - A warning is what flagd loads but is probably a mistake: a $ref to an
//     evaluator the flag set does not define, a variant the targeting
//     returns that the flag does not have, a variant nothing can return, a
//     rule object with two operators, ... It is admitted with admission
//     warnings (kubectl prints them) and reported by the FeatureFlag's
//     Consistent condition; the flag set is served. With strict validation
//     (NewValidator(true), the manager's --strict-validation) warnings are
//     errors.

// problem is what a check finds: an error, or a warning (see above).
type problem struct {
	*field.Error
	warning bool
}

func errorOf(e *field.Error) *problem   { return &problem{Error: e} }
func warningOf(e *field.Error) *problem { return &problem{Error: e, warning: true} }

// flagCheck is one rule about one flag. Checks run in order and a flag stops
// at its first error, so that one mistake yields one message; warnings do
// not stop it.
type flagCheck func(path *field.Path, key string, flag *v1beta1.Flag, ctx *flagSetContext) *problem

// flagSetContext carries what checks of single flags need from the whole set.
type flagSetContext struct {
	evaluators map[string]json.RawMessage
	variants   map[string]json.RawMessage // of the flag being checked
}

var flagChecks = []flagCheck{
	checkTargetingDepth,
	checkState,
	checkVariantsObject,
	checkVariantNames,
	checkDefaultVariant,
	checkVariantTypes,
	checkTargetingObject,
	checkTargetingRefs,
	checkTargetingOperators,
	checkTargetingResults,
	checkUnreachableVariants,
}

// Validator tells whether flag sets can be served. It holds the one
// operator-wide setting of the rules (strict: warnings are errors, the
// manager's --strict-validation); one Validator is made at start and gives
// the topology its rendering of flag sets (TopologyOptions), which every
// reader of a flag set's content, validity or revision takes from the
// graph. It is safe for concurrent use. A nil *Validator is a non-strict
// one.
type Validator struct {
	strict bool
}

// NewValidator returns a Validator; strict makes warnings errors: flag sets
// with a warning are then refused on admission and not served.
func NewValidator(strict bool) *Validator {
	return &Validator{strict: strict}
}

// Strict tells whether warnings are errors.
func (v *Validator) Strict() bool { return v != nil && v.strict }

// Rendering renders, validates and hashes a flag set: the flagd document
// flagplane serves and its revision (Serve) and size (topology.Rendered.Size: its
// bytes, as a ConfigMap's limit counts them); why it cannot be served, nil when it
// can (an error whose message lists every problem, each naming the flag
// and the rule; warnings count only when the Validator is strict); and
// its warnings, whatever the strictness. The topology calls it once per
// edit.
func (v *Validator) Rendering(ff *v1beta1.FeatureFlag) topology.Rendered {
	errs, warnings := ValidateFlagSpec(&ff.Spec.FlagSpec, field.NewPath("spec", "flagSpec"))
	return v.Rendered(ff, errs, warnings)
}

// Rendered is Rendering for a flag set validated already: errs and
// warnings are what ValidateFlagSpec found in it.
func (v *Validator) Rendered(ff *v1beta1.FeatureFlag, errs, warnings field.ErrorList) topology.Rendered {
	r := topology.Rendered{Warnings: fieldMessages(warnings)}
	r.Err = reportedErr(distinct(fieldMessages(errs)))
	if v.Strict() && len(r.Warnings) > 0 {
		msgs := slices.Clone(r.Warnings[:min(len(r.Warnings), maxReported)])
		if more := len(r.Warnings) - len(msgs); more > 0 {
			msgs = append(msgs, fmt.Sprintf("and %d more", more))
		}
		if r.Err != nil {
			msgs = append([]string{r.Err.Error()}, msgs...)
		}
		r.Err = errors.New(strings.Join(msgs, ", "))
	}
	content, revision, err := Serve(ff)
	if err != nil {
		if r.Err == nil {
			r.Err = err
		}
		return r
	}
	r.Content, r.Revision, r.Size = content, revision, len(content)
	return r
}

// TopologyOptions are the options of every topology flagplane keeps: it
// renders flag sets with Rendering.
func (v *Validator) TopologyOptions() []topology.Option {
	return []topology.Option{topology.WithFlagSetRendering(v.Rendering)}
}

func fieldMessages(l field.ErrorList) []string {
	if len(l) == 0 {
		return nil
	}
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Error()
	}
	return out
}

// ValidateFlagSpec returns the problems of a flag set, errors and warnings
// (see the rules above): flag-set level ones first, then per flag in flag
// key order.
//
// Two layers run. First the semantic rules of this file, which the schema
// cannot express or expresses with unreadable messages: a chain of checks
// per flag that stops at the first error (defaultVariant among the
// variants, one value type per flag, every $ref names an entry of
// $evaluators, targeting only uses operators flagd knows, every variant a
// rule can return exists, ...). Then flagd's own JSON schema (flagd-schemas,
// embedded, see schema.go) for whatever the rules did not
// report already, so that a flag set without errors is one flagd and the
// OpenFeature Operator accept, and a flag gets one message, not two.
func ValidateFlagSpec(spec *v1beta1.FlagSpec, path *field.Path) (errs, warnings field.ErrorList) {
	reported := map[string]bool{} // schema owners (see schemaOwner) that have a message
	add := func(p *problem, owner string) {
		if p.warning {
			warnings = append(warnings, p.Error)
			return
		}
		errs = append(errs, p.Error)
		reported[owner] = true
	}
	ctx := &flagSetContext{}
	if len(spec.Evaluators) > 0 {
		if err := decodeObject(spec.Evaluators, &ctx.evaluators); err != nil {
			add(errorOf(field.Invalid(path.Child("$evaluators"), truncate(string(spec.Evaluators)), "must be a JSON object")), ownerEvaluators)
		}
	}
	if n := ruleValues(spec, ctx.evaluators); n > MaxRuleValues {
		// Judged no further: the rules alone would not be judged in time.
		return field.ErrorList{tooManyRuleValues(path, n)}, nil
	}
	if len(spec.Metadata) > 0 {
		var md map[string]json.RawMessage
		if err := decodeObject(spec.Metadata, &md); err != nil {
			add(errorOf(field.Invalid(path.Child("metadata"), truncate(string(spec.Metadata)), "must be a JSON object")), ownerMetadata)
		}
		for _, w := range reservedKeys(path.Child("metadata"), md) {
			add(warningOf(w), ownerMetadata)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ctx.evaluators)) {
		if e := tooDeep(path.Child("$evaluators").Key(name), ctx.evaluators[name]); e != nil {
			// A warning, as every problem of an evaluator: flagd loads it.
			add(warningOf(e), ownerEvaluators+"/"+name)
			reported[ownerEvaluators+"/"+name] = true
			continue
		}
		if p := checkEvaluator(path.Child("$evaluators").Key(name), name, ctx); p != nil {
			add(p, ownerEvaluators+"/"+name)
			// One message per evaluator, warning or not.
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
			// flagd's schema refuses it, and so does the OpenFeature Operator.
			add(errorOf(field.Invalid(fpath, key, "a flag key must not be empty")), ownerFlag(key))
			continue
		}
		for _, check := range flagChecks {
			if p := check(fpath, key, &flag, ctx); p != nil {
				add(p, ownerFlag(key))
				if !p.warning {
					break
				}
			}
		}
		if bytes.Contains(flag.Metadata, []byte(`"`+ReservedMetadataPrefix)) {
			var md map[string]json.RawMessage
			if decodeObject(flag.Metadata, &md) == nil {
				for _, w := range reservedKeys(fpath.Child("metadata"), md) {
					add(warningOf(w), ownerFlag(key))
				}
			}
		}
	}
	schemaErrs, schemaWarnings := schemaErrors(spec, path, reported)
	return append(errs, schemaErrs...), append(warnings, schemaWarnings...)
}

// reservedKeys warns of each key of md under ReservedMetadataPrefix: what
// flagplane serves leaves it out (Serve).
func reservedKeys(path *field.Path, md map[string]json.RawMessage) field.ErrorList {
	var out field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if strings.HasPrefix(k, ReservedMetadataPrefix) {
			out = append(out, field.Invalid(path.Key(k), truncate(string(md[k])),
				"keys under "+ReservedMetadataPrefix+" are flagplane's: what flagd serves leaves this one out and carries flagplane's "+
					MetadataFlagSet+" and "+MetadataRevision+" instead"))
		}
	}
	return out
}

// checkState: flagd's schema knows ENABLED and DISABLED (the CRD refuses
// anything else already).
func checkState(path *field.Path, _ string, flag *v1beta1.Flag, _ *flagSetContext) *problem {
	if flag.State != v1beta1.FlagStateEnabled && flag.State != v1beta1.FlagStateDisabled {
		return errorOf(field.NotSupported(path.Child("state"), flag.State, []string{v1beta1.FlagStateEnabled, v1beta1.FlagStateDisabled}))
	}
	return nil
}

// checkVariantsObject: flagd cannot load variants that are not an object;
// its schema wants at least one.
func checkVariantsObject(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *problem {
	if len(flag.Variants) == 0 {
		return errorOf(field.Required(path.Child("variants"), "a flag needs at least one variant"))
	}
	if err := decodeObject(flag.Variants, &ctx.variants); err != nil {
		return errorOf(field.Invalid(path.Child("variants"), truncate(string(flag.Variants)), "must be a JSON object of variant name to value"))
	}
	if len(ctx.variants) == 0 {
		return errorOf(field.Required(path.Child("variants"), "a flag needs at least one variant"))
	}
	return nil
}

// checkVariantNames: flagd's schema refuses an empty variant name.
func checkVariantNames(path *field.Path, _ string, _ *v1beta1.Flag, ctx *flagSetContext) *problem {
	if _, ok := ctx.variants[""]; ok {
		return errorOf(field.Invalid(path.Child("variants").Key(""), "", "a variant name must not be empty"))
	}
	return nil
}

// checkDefaultVariant: flagd refuses the whole flag set when a defaultVariant
// is not one of the flag's variants. An empty one loads, but then a flag
// without a matching targeting rule has no value.
func checkDefaultVariant(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *problem {
	if flag.DefaultVariant == "" {
		return warningOf(field.Invalid(path.Child("defaultVariant"), "",
			"is empty: flagd evaluates the flag to an error (clients fall back to their code default) unless targeting picks a variant"))
	}
	if _, ok := ctx.variants[flag.DefaultVariant]; !ok {
		return errorOf(field.Invalid(path.Child("defaultVariant"), flag.DefaultVariant,
			"must be one of the variants: "+listed(slices.Sorted(maps.Keys(ctx.variants)))))
	}
	return nil
}

// checkVariantTypes: flagd's schema wants the variants of a flag to share a
// type, and none to be null or an array.
func checkVariantTypes(path *field.Path, _ string, _ *v1beta1.Flag, ctx *flagSetContext) *problem {
	var first, firstType string
	for _, name := range slices.Sorted(maps.Keys(ctx.variants)) {
		t := jsonType(ctx.variants[name])
		switch t {
		case "null":
			return errorOf(field.Invalid(path.Child("variants").Key(name), "null", "a variant must have a value"))
		case "array":
			return errorOf(field.Invalid(path.Child("variants").Key(name), truncate(string(ctx.variants[name])),
				"a variant value must be a boolean, string, number or object, not an array"))
		}
		if first == "" {
			first, firstType = name, t
			continue
		}
		if t != firstType {
			return errorOf(field.Invalid(path.Child("variants").Key(name), truncate(string(ctx.variants[name])),
				fmt.Sprintf("all variants of a flag must have one type: %q is %s but %q is %s", truncate(name), t, truncate(first), firstType)))
		}
	}
	return nil
}

// checkTargetingObject: flagd's schema wants targeting to be a rule object.
func checkTargetingObject(path *field.Path, _ string, flag *v1beta1.Flag, _ *flagSetContext) *problem {
	if len(flag.Targeting) == 0 {
		return nil
	}
	var rule any
	if err := json.Unmarshal(flag.Targeting, &rule); err != nil {
		return errorOf(field.Invalid(path.Child("targeting"), truncate(string(flag.Targeting)), "must be valid JSON"))
	}
	if _, ok := rule.(map[string]any); !ok {
		return errorOf(field.Invalid(path.Child("targeting"), truncate(string(flag.Targeting)), "must be a JSON object"))
	}
	return nil
}

// checkTargetingRefs: a $ref that names no evaluator of the flag set is
// left in the rule by flagd, which then fails to evaluate it (the flag
// evaluates to an error). flagd loads it, and so does the OpenFeature
// Operator: a warning.
func checkTargetingRefs(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *problem {
	rule, ok := targetingRule(flag)
	if !ok {
		return nil
	}
	for _, ref := range collectRefs(rule) {
		if _, ok := ctx.evaluators[ref]; !ok {
			return warningOf(field.Invalid(path.Child("targeting"), ref,
				fmt.Sprintf("$ref %q does not name an entry of $evaluators: flagd evaluates the flag to an error", truncate(ref))))
		}
	}
	return nil
}

// targetingRule decodes a flag's targeting, when it is a rule object.
func targetingRule(flag *v1beta1.Flag) (any, bool) {
	if len(flag.Targeting) == 0 {
		return nil, false
	}
	var rule any
	if json.Unmarshal(flag.Targeting, &rule) != nil {
		return nil, false
	}
	_, ok := rule.(map[string]any)
	return rule, ok
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
			for _, k := range slices.Sorted(maps.Keys(t)) {
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
