package flagsets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// knownOperators are the operators flagd's targeting schema (targeting.json
// of flagd-schemas v0.2.13) accepts: JSONLogic's plus flagd's own fractional,
// sem_ver, starts_with and ends_with. A rule object names exactly one of them,
// or is a {"$ref": "<evaluator>"}.
var knownOperators = []string{
	"!", "!!", "!=", "!==", "%", "*", "+", "-", "/", "<", "<=", "==", "===", ">", ">=",
	"all", "and", "cat", "ends_with", "filter", "fractional", "if", "in", "map", "max",
	"merge", "min", "missing", "missing_some", "none", "or", "reduce", "sem_ver", "some",
	"starts_with", "substr", "var",
}

// checkTargetingOperators: every rule object of the flag's targeting names
// one known operator (or is a $ref alone), and fractional weights are not
// negative. flagd's schema refuses unknown operators and $ref objects with
// other keys (errors); it lets a rule object with two operators and a
// negative weight through, which flagd then evaluates in a way nobody
// meant (warnings).
func checkTargetingOperators(path *field.Path, _ string, flag *v1beta1.Flag, _ *flagSetContext) *problem {
	rule, ok := targetingRule(flag)
	if !ok {
		return nil
	}
	if msg, warn := ruleProblem(rule); msg != "" {
		e := field.Invalid(path.Child("targeting"), truncate(string(flag.Targeting)), msg)
		if warn {
			return warningOf(e)
		}
		return errorOf(e)
	}
	return nil
}

// checkTargetingResults: a variant name that the targeting can return as a
// literal (the branches of "if", the buckets of "fractional", a bare string)
// should be a variant of the flag. flagd loads it, and evaluates the flag
// to an error when the rule returns it: a warning.
func checkTargetingResults(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *problem {
	rule, ok := targetingRule(flag)
	if !ok {
		return nil
	}
	for _, name := range ruleResults(rule) {
		if _, ok := ctx.variants[name]; !ok {
			return warningOf(field.Invalid(path.Child("targeting"), name,
				fmt.Sprintf("targeting can return variant %q, which the flag does not have (variants: %s): flagd evaluates the flag to an error then",
					truncate(name), listed(slices.Sorted(maps.Keys(ctx.variants))))))
		}
	}
	return nil
}

// checkUnreachableVariants: when every result of the targeting is known
// (literals and null, see knownResults), a variant that is neither one of
// them nor the defaultVariant can never be served: a warning. A flag
// without targeting is not checked: its other variants are there to switch
// the defaultVariant to.
func checkUnreachableVariants(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *problem {
	rule, ok := targetingRule(flag)
	if !ok || len(rule.(map[string]any)) == 0 {
		return nil
	}
	results, complete := knownResults(rule)
	if !complete {
		return nil
	}
	for _, r := range results {
		if _, ok := ctx.variants[r]; !ok {
			return nil // checkTargetingResults warned: a misspelt result, not an unreachable variant
		}
	}
	returned := setOf(results)
	var unreachable []string
	for _, name := range slices.Sorted(maps.Keys(ctx.variants)) {
		if name != flag.DefaultVariant && !returned[name] {
			unreachable = append(unreachable, name)
		}
	}
	if len(unreachable) == 0 {
		return nil
	}
	return warningOf(field.Invalid(path.Child("variants"), listed(unreachable),
		fmt.Sprintf("can never be served: the targeting returns only %s and the defaultVariant is %q",
			quotedList(results), truncate(flag.DefaultVariant))))
}

func quotedList(names []string) string {
	if len(names) == 0 {
		return "null"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return listed(q)
}

// checkEvaluator checks one entry of $evaluators: a rule object whose
// operators are known and whose $refs name other evaluators. flagd refuses
// the flag set when an evaluator is empty ({}, or a value shorter than
// three characters); everything else it loads, and the OpenFeature
// Operator does not check evaluators: warnings.
func checkEvaluator(path *field.Path, name string, ctx *flagSetContext) *problem {
	raw := ctx.evaluators[name]
	if compact := compactJSON(raw); len(compact) < 3 {
		return errorOf(field.Invalid(path, compact, "flagd refuses an empty evaluator"))
	}
	if name == "" {
		return warningOf(field.Invalid(path, "", "an evaluator name should not be empty: no $ref can name it"))
	}
	var rule any
	if err := json.Unmarshal(raw, &rule); err != nil {
		return errorOf(field.Invalid(path, truncate(string(raw)), "must be valid JSON"))
	}
	if _, ok := rule.(map[string]any); !ok {
		return warningOf(field.Invalid(path, truncate(string(raw)), "an evaluator should be a JSON object (a targeting rule)"))
	}
	if msg, _ := ruleProblem(rule); msg != "" {
		return warningOf(field.Invalid(path, truncate(string(raw)), msg))
	}
	for _, ref := range collectRefs(rule) {
		if _, ok := ctx.evaluators[ref]; !ok {
			return warningOf(field.Invalid(path, ref, fmt.Sprintf("$ref %q does not name an entry of $evaluators", truncate(ref))))
		}
	}
	return nil
}

// compactJSON is raw without insignificant space, as flagd sees it (or raw
// itself when it is not JSON).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// ruleProblem walks a JSONLogic rule and describes its first structural
// problem, or returns "". warn tells whether flagd's schema lets the
// problem through (see checkTargetingOperators).
func ruleProblem(n any) (msg string, warn bool) {
	switch t := n.(type) {
	case map[string]any:
		if len(t) == 0 {
			return "", false // an empty rule: flagd serves the default variant
		}
		if _, ok := t["$ref"]; ok {
			if len(t) > 1 {
				return fmt.Sprintf("a $ref object takes no other key, found %s", strings.Join(slices.Sorted(maps.Keys(t)), ", ")), false
			}
			if _, ok := t["$ref"].(string); !ok {
				return "$ref must name an evaluator as a string", false
			}
			return "", false
		}
		if len(t) > 1 {
			for _, op := range slices.Sorted(maps.Keys(t)) {
				if !slices.Contains(knownOperators, op) {
					return fmt.Sprintf("unknown operator %q; flagd knows %s", truncate(op), strings.Join(knownOperators, " ")), false
				}
			}
			return fmt.Sprintf("a rule object names exactly one operator, found %s: JSONLogic uses one of them", strings.Join(slices.Sorted(maps.Keys(t)), ", ")), true
		}
		for op, args := range t {
			if !slices.Contains(knownOperators, op) {
				return fmt.Sprintf("unknown operator %q; flagd knows %s", truncate(op), strings.Join(knownOperators, " ")), false
			}
			if op == "fractional" {
				if msg := fractionalProblem(args); msg != "" {
					return msg, true
				}
			}
			return ruleProblem(args)
		}
	case []any:
		for _, e := range t {
			if msg, warn := ruleProblem(e); msg != "" {
				return msg, warn
			}
		}
	}
	return "", false
}

// fractionalProblem checks the buckets of a fractional rule: ["variant", weight].
func fractionalProblem(args any) string {
	list, ok := args.([]any)
	if !ok {
		return ""
	}
	for _, a := range list {
		bucket, ok := a.([]any)
		if !ok || len(bucket) != 2 {
			continue
		}
		if w, ok := bucket[1].(float64); ok && w < 0 {
			return fmt.Sprintf("fractional weight of %v must not be negative, got %v", bucket[0], w)
		}
	}
	return ""
}

// ruleResults lists the string literals a rule can return as a variant name:
// a bare string, the value branches of "if" (recursively) and the bucket
// names of "fractional". Results of other operators are not known until
// evaluation and are not listed.
func ruleResults(n any) []string {
	var out []string
	seen := stringSet{}
	var walk func(any)
	walk = func(n any) {
		switch t := n.(type) {
		case string:
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		case map[string]any:
			if len(t) != 1 {
				return
			}
			if args, ok := t["if"].([]any); ok {
				for i := 1; i < len(args); i += 2 {
					walk(args[i])
				}
				if len(args) >= 3 && len(args)%2 == 1 {
					walk(args[len(args)-1])
				}
			}
			if args, ok := t["fractional"].([]any); ok {
				for _, a := range args {
					if bucket, ok := a.([]any); ok && len(bucket) >= 1 {
						walk(bucket[0])
					}
				}
			}
		}
	}
	walk(n)
	return out
}

// knownResults lists the variant names a rule can return and tells whether
// that is all it can return: every result position (the rule itself, the
// branches of "if", the buckets of "fractional") holds a string literal or
// null (the default variant). Any other result (a "var", a "cat", a $ref,
// ...) is known only at evaluation, and the list is incomplete.
func knownResults(n any) (out []string, complete bool) {
	complete = true
	seen := stringSet{}
	var walk func(any)
	walk = func(n any) {
		switch t := n.(type) {
		case nil:
		case string:
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		case map[string]any:
			if len(t) != 1 {
				complete = false
				return
			}
			if args, ok := t["if"].([]any); ok {
				for i := 1; i < len(args); i += 2 {
					walk(args[i])
				}
				if len(args)%2 == 1 && len(args) >= 3 {
					walk(args[len(args)-1])
				}
				return
			}
			if args, ok := t["fractional"].([]any); ok {
				for _, a := range args {
					if bucket, ok := a.([]any); ok && len(bucket) >= 1 {
						walk(bucket[0])
					}
				}
				return
			}
			complete = false
		default:
			complete = false
		}
	}
	walk(n)
	sort.Strings(out)
	return out, complete
}
