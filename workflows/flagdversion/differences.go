package flagdversion

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Difference is one flag of a flag set that an injected flagd evaluates
// otherwise than the Reference does.
type Difference struct {
	// Flag is the flag's key.
	Flag string
	// Behaviour names what differs: "DISABLED", "no defaultVariant",
	// "fractional bucketing", "fractional weights", "fractional with one
	// bucket", "fractional with an empty targetingKey", "fractional weights
	// adding up to 0".
	Behaviour string
	// Message says how, naming the flag and both releases.
	Message string
}

// Behaviours Differences names.
const (
	BehaviourDisabled         = "DISABLED"
	BehaviourNoDefaultVariant = "no defaultVariant"
	BehaviourBucketing        = "fractional bucketing"
	BehaviourWeights          = "fractional weights"
	BehaviourSingleBucket     = "fractional with one bucket"
	BehaviourEmptyKey         = "fractional with an empty targetingKey"
	BehaviourZeroWeights      = "fractional weights adding up to 0"
)

// Differences lists the flags of spec whose evaluation by the injected
// flagd differs from the Reference's, in a way the flag set exercises: a
// flag with state DISABLED, a flag without a defaultVariant, a fractional
// rule (in its targeting or an evaluator it names with $ref) whose
// bucketing, weights, bucket count, targetingKey or total weight the two
// releases treat apart. Only where the two releases' Semantics differ; a
// flagd flagplane does not vouch for has no known semantics, and none. The
// list is in flag key order.
func Differences(spec *v1beta1.FlagSpec, in Injected) []Difference {
	if !in.Vouched || spec == nil {
		return nil
	}
	got, want := in.Facts.Semantics, table[Reference].Semantics
	if got == want {
		return nil
	}
	d := differ{in: in, ref: Reference, got: got, want: want, evaluators: parseEvaluators(spec.Evaluators)}
	for _, key := range slices.Sorted(maps.Keys(spec.Flags)) {
		d.flag(key, spec.Flags[key])
	}
	return d.out
}

type differ struct {
	in         Injected
	ref        Version
	got, want  Semantics
	evaluators map[string]any
	out        []Difference
}

func (d *differ) add(key, behaviour, format string, a ...any) {
	d.out = append(d.out, Difference{Flag: key, Behaviour: behaviour,
		Message: fmt.Sprintf("spec.flagSpec.flags[%s]: %s: ", key, behaviour) + fmt.Sprintf(format, a...)})
}

func (d *differ) flag(key string, f v1beta1.Flag) {
	if f.State == v1beta1.FlagStateDisabled && d.got.Disabled != d.want.Disabled {
		d.add(key, BehaviourDisabled, "%s %s; flagd %s %s", d.in, disabledText[d.got.Disabled], d.ref, disabledText[d.want.Disabled])
	}
	if f.DefaultVariant == "" && d.got.NoDefaultVariant != d.want.NoDefaultVariant {
		d.add(key, BehaviourNoDefaultVariant, "%s %s; flagd %s %s", d.in, noDefaultText[d.got.NoDefaultVariant], d.ref, noDefaultText[d.want.NoDefaultVariant])
	}
	var rule any
	if len(f.Targeting) == 0 || json.Unmarshal(f.Targeting, &rule) != nil {
		return
	}
	seen := map[string]bool{}
	for _, args := range d.fractionals(rule, seen, 0) {
		d.fractional(key, args)
	}
}

var disabledText = map[Disabled]string{
	DisabledNotFound: "answers its evaluations with the error FLAG_NOT_FOUND and leaves it out of bulk evaluations",
	DisabledReason:   "resolves it with reason DISABLED and no value (SDKs return the caller's default) and lists it in bulk evaluations",
}

var noDefaultText = map[NoDefaultVariant]string{
	NoDefaultRefused:  "refuses the whole flag set, so that none of its flags is served",
	NoDefaultNotFound: "answers an evaluation its targeting does not settle with the error FLAG_NOT_FOUND",
	NoDefaultCodeDefault: "resolves an evaluation its targeting does not settle with reason DEFAULT and no value " +
		"(SDKs return the caller's default; flagd.evaluation.v1 callers still get FLAG_NOT_FOUND)",
}

// fractionals finds the arguments of every fractional operator in a rule,
// following $ref into $evaluators (each evaluator once per flag).
func (d *differ) fractionals(n any, seen map[string]bool, depth int) [][]any {
	if depth > 64 {
		return nil
	}
	var out [][]any
	switch t := n.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok && len(t) == 1 {
			if seen[ref] {
				return nil
			}
			seen[ref] = true
			return d.fractionals(d.evaluators[ref], seen, depth+1)
		}
		for _, op := range slices.Sorted(maps.Keys(t)) {
			if args, ok := t[op].([]any); ok && op == "fractional" {
				out = append(out, args)
			}
			out = append(out, d.fractionals(t[op], seen, depth+1)...)
		}
	case []any:
		for _, e := range t {
			out = append(out, d.fractionals(e, seen, depth+1)...)
		}
	}
	return out
}

// fractional compares one fractional rule: args are the operator's
// arguments, an optional bucketing expression then the buckets.
func (d *differ) fractional(key string, args []any) {
	got, want := d.got.Fractional, d.want.Fractional
	// A first argument that is not a bucket is the bucketing expression;
	// flagd drops a null one and buckets by the targetingKey, as without one.
	byKey, buckets := true, args
	if len(args) > 0 {
		switch args[0].(type) {
		case []any:
		case nil:
			buckets = args[1:]
		default:
			byKey, buckets = false, args[1:]
		}
	}
	weights, literal := bucketWeights(buckets)
	if got.Bucketing != want.Bucketing && len(buckets) > 1 {
		d.add(key, BehaviourBucketing, "%s maps the hash of the bucketing value to a bucket %s, flagd %s %s: the same targetingKey may get another variant",
			d.in, bucketingText[got.Bucketing], d.ref, bucketingText[want.Bucketing])
	}
	if got.WeightsSumTo100 != want.WeightsSumTo100 {
		if sum, pairs := sumIfPairs(buckets); !pairs || sum != 100 {
			d.add(key, BehaviourWeights, "%s takes only buckets of [variant, weight] whose weights add up to 100, which these are not: the rule fails and the defaultVariant is served; "+
				"flagd %s weighs the buckets against each other", d.in, d.ref)
		}
	}
	if got.IntegerWeights != want.IntegerWeights {
		for i, w := range weights {
			if !literal[i] {
				continue
			}
			switch {
			case w != math.Trunc(w):
				d.add(key, BehaviourWeights, "weight %v of bucket %d: %s %s; flagd %s %s", w, i, d.in, fractionText(got, w), d.ref, fractionText(want, w))
			case w < 0:
				d.add(key, BehaviourWeights, "weight %v of bucket %d: %s %s; flagd %s %s", w, i, d.in, negativeText(got), d.ref, negativeText(want))
			}
		}
	}
	if got.SingleBucket != want.SingleBucket && len(args) == 1 {
		d.add(key, BehaviourSingleBucket, "%s %s; flagd %s %s", d.in, singleText[got.SingleBucket], d.ref, singleText[want.SingleBucket])
	}
	if got.EmptyTargetingKeyDefault != want.EmptyTargetingKeyDefault && byKey && len(buckets) > 0 {
		d.add(key, BehaviourEmptyKey, "the rule buckets by the targetingKey: for an evaluation whose targetingKey is \"\", %s %s; flagd %s %s",
			d.in, emptyKeyText[got.EmptyTargetingKeyDefault], d.ref, emptyKeyText[want.EmptyTargetingKeyDefault])
	}
	if got.ZeroWeightDefault != want.ZeroWeightDefault && len(buckets) > 0 && allZero(weights, literal) {
		d.add(key, BehaviourZeroWeights, "%s %s; flagd %s %s", d.in, zeroText[got.ZeroWeightDefault], d.ref, zeroText[want.ZeroWeightDefault])
	}
}

var bucketingText = map[Bucketing]string{
	BucketingPercent: "by percent shares",
	BucketingWeights: "by 32-bit integer weights",
}

var singleText = map[bool]string{
	false: "needs at least two arguments to fractional: a rule of one bucket fails and the defaultVariant is served",
	true:  "puts every evaluation into the one bucket",
}

var emptyKeyText = map[bool]string{
	false: "buckets it by the flag key alone, so that all such evaluations get one variant",
	true:  "serves the defaultVariant",
}

var zeroText = map[bool]string{
	false: "picks no variant and answers with an error",
	true:  "serves the defaultVariant",
}

// fractionText says what a release makes of a weight that is not a whole number.
func fractionText(f Fractional, w float64) string {
	if f.IntegerWeights {
		return "makes the rule fail and serves the defaultVariant"
	}
	return fmt.Sprintf("truncates it to %v", math.Trunc(w))
}

// negativeText says what a release makes of a negative weight.
func negativeText(f Fractional) string {
	if f.IntegerWeights {
		return "counts it as 0"
	}
	return "subtracts it from the total weight"
}

// bucketWeights reads the weight of every bucket: a literal number, 1 for
// a bucket without one (literal too), or unknown (not literal: computed).
func bucketWeights(buckets []any) (weights []float64, literal []bool) {
	for _, b := range buckets {
		bucket, _ := b.([]any)
		switch {
		case len(bucket) < 2:
			weights, literal = append(weights, 1), append(literal, true)
		default:
			w, ok := bucket[1].(float64)
			weights, literal = append(weights, w), append(literal, ok)
		}
	}
	return weights, literal
}

// sumIfPairs adds the weights of buckets that are all [string, number].
func sumIfPairs(buckets []any) (sum float64, pairs bool) {
	for _, b := range buckets {
		bucket, ok := b.([]any)
		if !ok || len(bucket) != 2 {
			return 0, false
		}
		if _, ok := bucket[0].(string); !ok {
			return 0, false
		}
		w, ok := bucket[1].(float64)
		if !ok {
			return 0, false
		}
		sum += math.Trunc(w)
	}
	return sum, true
}

func allZero(weights []float64, literal []bool) bool {
	for i, w := range weights {
		if !literal[i] || w != 0 {
			return false
		}
	}
	return true
}

// parseEvaluators reads $evaluators; what is not JSON is left out.
func parseEvaluators(raw json.RawMessage) map[string]any {
	var m map[string]any
	if len(strings.TrimSpace(string(raw))) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
