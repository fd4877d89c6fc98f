package flagsets

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The bounds of what flagplane judges. Admission answers within the
// webhook's timeout (5 s), and the topology renders a flag set on every
// edit. flagd's schema (schema.go) costs tens of microseconds per JSON
// value of a rule, times the rule's depth: a 1.5 MiB flag set of rules
// took minutes, a single rule nested 10,000 levels deep (as deep as the
// API server's JSON decoder goes) 20 seconds. Within these bounds a flag
// set is judged in about a second.
const (
	// MaxRuleDepth is the deepest a targeting rule or an evaluator may
	// nest, objects and arrays counted: a rule of ten nested "if"s with
	// conditions three operators deep is about 40 levels.
	MaxRuleDepth = 64
	// MaxRuleValues is the most JSON values (objects, arrays, strings,
	// numbers, booleans, nulls) the targeting rules and $evaluators of one
	// flag set hold together: 2,500 flags with a rule of 20 values.
	MaxRuleValues = 50_000
)

// ruleSize measures a JSON value: how deep it nests, and how many values it
// holds, itself included. raw is valid JSON (a json.RawMessage decoded
// from the object), so a scan of its bytes tells both without decoding it:
// every value is the document itself or an element of a container, and a
// container's elements are its commas plus one when it is not empty.
func ruleSize(raw []byte) (depth, values int) {
	if len(raw) == 0 {
		return 0, 0
	}
	level, opened := 0, false
	inString, escaped := false, false
	values = 1
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if opened && c != '}' && c != ']' {
			values++ // the first element of a container that is not empty
		}
		opened = false
		switch c {
		case '"':
			inString = true
		case '{', '[':
			level++
			depth = max(depth, level)
			opened = true
		case '}', ']':
			level--
		case ',':
			values++
		}
	}
	return depth, values
}

// ruleValues adds up the values of every rule of spec: each flag's
// targeting and each evaluator.
func ruleValues(spec *v1beta1.FlagSpec, evaluators map[string]json.RawMessage) int {
	n := 0
	for _, f := range spec.Flags {
		_, v := ruleSize(f.Targeting)
		n += v
	}
	for _, raw := range evaluators {
		_, v := ruleSize(raw)
		n += v
	}
	return n
}

// tooManyRuleValues is the error of a flag set whose rules hold more than
// MaxRuleValues values.
func tooManyRuleValues(path *field.Path, n int) *field.Error {
	return &field.Error{Type: field.ErrorTypeTooMany, Field: path.String(), BadValue: n,
		Detail: fmt.Sprintf("the targeting rules and $evaluators hold %d JSON values, more than the %d flagplane judges within the admission timeout: split the flag set into smaller FeatureFlags",
			n, MaxRuleValues)}
}

// tooDeep is the error of a rule that nests deeper than MaxRuleDepth, or
// nil.
func tooDeep(path *field.Path, raw []byte) *field.Error {
	depth, _ := ruleSize(raw)
	if depth <= MaxRuleDepth {
		return nil
	}
	return field.Invalid(path, truncate(string(raw)),
		fmt.Sprintf("nests %d levels deep, more than the %d flagplane judges within the admission timeout", depth, MaxRuleDepth))
}

// checkTargetingDepth: a rule deeper than MaxRuleDepth is not judged
// further (and the schema layer leaves it out, see decodeForSchema).
func checkTargetingDepth(path *field.Path, _ string, flag *v1beta1.Flag, _ *flagSetContext) *problem {
	if e := tooDeep(path.Child("targeting"), flag.Targeting); e != nil {
		return errorOf(e)
	}
	return nil
}

// maxReported bounds the problems the error of a rendering names: the
// status and Events of a FeatureFlag carry its message (a condition's
// message holds at most 32768 characters), and joining many thousands of
// messages costs seconds.
const maxReported = 20

// maxReportedBytes bounds one message of the error of a rendering: a
// message names values of the flag set (its variants, say), which may be
// many.
const maxReportedBytes = 1024

// reportedErr is the error of a rendering: the first maxReported of msgs
// (the aggregate's wording), each at most maxReportedBytes long, and how
// many more there are; nil when there is none.
func reportedErr(msgs []string) error {
	for i, m := range msgs[:min(len(msgs), maxReported)] {
		msgs[i] = shorten(m, maxReportedBytes)
	}
	switch {
	case len(msgs) == 0:
		return nil
	case len(msgs) == 1:
		return errors.New(msgs[0])
	case len(msgs) > maxReported:
		return fmt.Errorf("[%s, and %d more]", strings.Join(msgs[:maxReported], ", "), len(msgs)-maxReported)
	}
	return fmt.Errorf("[%s]", strings.Join(msgs, ", "))
}

// distinct drops the messages that repeat an earlier one, as an aggregate
// does.
func distinct(msgs []string) []string {
	seen := make(map[string]bool, len(msgs))
	return slices.DeleteFunc(msgs, func(m string) bool {
		if seen[m] {
			return true
		}
		seen[m] = true
		return false
	})
}

// maxListed bounds the names a message lists: a flag of 60,000 variants
// gets a message of a line, not of 600 KiB.
const maxListed = 20

// listed joins the first maxListed names, and counts the others.
func listed(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

// stringSet is a set of strings: the variants, or the results of a rule.
type stringSet map[string]bool

func setOf(names []string) stringSet {
	s := make(stringSet, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

// truncate shortens a value for a message: field errors print it whole.
func truncate(s string) string { return shorten(s, 120) }

// shorten cuts s to at most max bytes and "...", at a rune boundary.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
