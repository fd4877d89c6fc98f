package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
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
// negative.
func checkTargetingOperators(path *field.Path, _ string, flag *v1beta1.Flag, _ *flagSetContext) *field.Error {
	if len(flag.Targeting) == 0 {
		return nil
	}
	var rule any
	if json.Unmarshal(flag.Targeting, &rule) != nil {
		return nil // checkTargetingRefs reported it
	}
	if msg := ruleProblem(rule); msg != "" {
		return field.Invalid(path.Child("targeting"), truncate(string(flag.Targeting)), msg)
	}
	return nil
}

// checkTargetingResults: a variant name that the targeting can return as a
// literal (the branches of "if", the buckets of "fractional", a bare string)
// must be a variant of the flag. flagd would otherwise fall back to the
// default variant with reason ERROR at evaluation time, silently.
func checkTargetingResults(path *field.Path, _ string, flag *v1beta1.Flag, ctx *flagSetContext) *field.Error {
	if len(flag.Targeting) == 0 {
		return nil
	}
	var rule any
	if json.Unmarshal(flag.Targeting, &rule) != nil {
		return nil
	}
	for _, name := range ruleResults(rule) {
		if _, ok := ctx.variants[name]; !ok {
			return field.Invalid(path.Child("targeting"), name,
				fmt.Sprintf("targeting can return variant %q, which the flag does not have (variants: %s)",
					name, strings.Join(sortedKeys(ctx.variants), ", ")))
		}
	}
	return nil
}

// checkEvaluator checks one entry of $evaluators: a rule object whose
// operators are known and whose $refs name other evaluators.
func checkEvaluator(path *field.Path, name string, ctx *flagSetContext) *field.Error {
	raw := ctx.evaluators[name]
	if name == "" {
		return field.Invalid(path, "", "an evaluator name must not be empty")
	}
	var rule any
	if err := json.Unmarshal(raw, &rule); err != nil {
		return field.Invalid(path, truncate(string(raw)), "must be valid JSON")
	}
	if _, ok := rule.(map[string]any); !ok {
		return field.Invalid(path, truncate(string(raw)), "an evaluator must be a JSON object (a targeting rule)")
	}
	if msg := ruleProblem(rule); msg != "" {
		return field.Invalid(path, truncate(string(raw)), msg)
	}
	for _, ref := range collectRefs(rule) {
		if _, ok := ctx.evaluators[ref]; !ok {
			return field.Invalid(path, ref, fmt.Sprintf("$ref %q does not name an entry of $evaluators", ref))
		}
	}
	return nil
}

// ruleProblem walks a JSONLogic rule and describes its first structural
// problem, or returns "".
func ruleProblem(n any) string {
	switch t := n.(type) {
	case map[string]any:
		if len(t) == 0 {
			return "" // an empty rule: flagd serves the default variant
		}
		if _, ok := t["$ref"]; ok {
			if len(t) > 1 {
				return fmt.Sprintf("a $ref object takes no other key, found %s", strings.Join(sortedKeys(t), ", "))
			}
			if _, ok := t["$ref"].(string); !ok {
				return "$ref must name an evaluator as a string"
			}
			return ""
		}
		if len(t) > 1 {
			return fmt.Sprintf("a rule object names exactly one operator, found %s", strings.Join(sortedKeys(t), ", "))
		}
		for op, args := range t {
			if !slices.Contains(knownOperators, op) {
				return fmt.Sprintf("unknown operator %q; flagd knows %s", op, strings.Join(knownOperators, " "))
			}
			if op == "fractional" {
				if msg := fractionalProblem(args); msg != "" {
					return msg
				}
			}
			return ruleProblem(args)
		}
	case []any:
		for _, e := range t {
			if msg := ruleProblem(e); msg != "" {
				return msg
			}
		}
	}
	return ""
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
	var walk func(any)
	walk = func(n any) {
		switch t := n.(type) {
		case string:
			if !slices.Contains(out, t) {
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

// truncate shortens a value for a message: field errors print it whole.
func truncate(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
