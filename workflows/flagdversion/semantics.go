package flagdversion

// Semantics are the ways a release evaluates a flag set that flagplane
// tells apart, because a flag set exercising them means something else
// under another release (see Differences). Each is read from core/ at the
// flagd/ tags named, as the facts of facts.go are.
type Semantics struct {
	// Disabled is how a flag with state DISABLED resolves.
	Disabled Disabled `json:"disabled"`
	// NoDefaultVariant is how a flag without a defaultVariant resolves
	// when its targeting picks no variant.
	NoDefaultVariant NoDefaultVariant `json:"noDefaultVariant"`
	// Fractional is how the fractional operator buckets.
	Fractional Fractional `json:"fractional"`
}

// Disabled is how a flag with state DISABLED resolves.
type Disabled string

const (
	// DisabledNotFound: the evaluation fails, with FLAG_NOT_FOUND (gRPC
	// NotFound, OFREP 404), and bulk evaluations leave the flag out
	// (core/pkg/evaluator/json.go returns FLAG_DISABLED, which
	// flagd/pkg/service/flag-evaluation and core/pkg/service/ofrep report as
	// not found): every release before v0.16.0.
	DisabledNotFound Disabled = "FLAG_NOT_FOUND"
	// DisabledReason: the evaluation succeeds with reason DISABLED and no
	// value or variant, so that SDKs return the caller's default, and bulk
	// evaluations include the flag: from flagd/v0.16.0 (commit 3c1d00be,
	// "DISABLED is a successful evaluation").
	DisabledReason Disabled = "DISABLED"
)

// NoDefaultVariant is how a flag without a defaultVariant resolves.
type NoDefaultVariant string

const (
	// NoDefaultRefused: flagd refuses the whole flag set (json.go's
	// validateDefaultVariants finds "" among no variant), so none of its
	// flags is served: every release before v0.12.6.
	NoDefaultRefused NoDefaultVariant = "FLAG_SET_REFUSED"
	// NoDefaultNotFound: the flag set loads; an evaluation that targeting
	// does not settle fails with FLAG_NOT_FOUND: from flagd/v0.12.6
	// (commit 3f6b78c8, "allowing null/missing defaultValue") to v0.13.3.
	NoDefaultNotFound NoDefaultVariant = "FLAG_NOT_FOUND"
	// NoDefaultCodeDefault: such an evaluation succeeds with reason
	// DEFAULT and no value, so that SDKs return the caller's default, over
	// OFREP and flagd.evaluation.v2; flagd.evaluation.v1 callers still get
	// FLAG_NOT_FOUND: from flagd/v0.14.0 (commit 89117d8e, "no
	// defaultVariant -> code default").
	NoDefaultCodeDefault NoDefaultVariant = "CALLER_DEFAULT"
)

// Fractional is how the fractional operator
// (core/pkg/evaluator/fractional.go) buckets. Every release hashes the
// same input with the same hash: the bucketing expression's value, or
// else the flag key followed by the targetingKey, with 32-bit murmur3.
type Fractional struct {
	// Bucketing maps the hash to a bucket.
	Bucketing Bucketing `json:"bucketing"`
	// WeightsSumTo100: every bucket must be [variant, weight], and the
	// weights must add up to 100; else the rule fails and the
	// defaultVariant is served. Releases before v0.11.0; from flagd/v0.11.0
	// (commit f82c094f, "relative weighting") weights are relative and a
	// bucket without one weighs 1.
	WeightsSumTo100 bool `json:"weightsSumTo100"`
	// IntegerWeights: a weight that is not a whole number makes the rule
	// fail, and a negative one counts as 0. Before, a weight is truncated
	// to a whole number and a negative one is subtracted from the total.
	// From flagd/v0.15.0 (commit 7190878f, "fractional bucketing
	// improvements").
	IntegerWeights bool `json:"integerWeights"`
	// SingleBucket: a rule with one bucket and no bucketing expression
	// puts everyone in it. Before, a rule needs two arguments and fails
	// otherwise. From flagd/v0.15.3 (commit 5fa86c6a, "allow single entry in
	// fractional operator").
	SingleBucket bool `json:"singleBucket"`
	// EmptyTargetingKeyDefault: a rule that buckets by the targetingKey
	// serves the defaultVariant when it is empty. Before, an empty
	// targetingKey is bucketed by the flag key alone: every such evaluation
	// gets one variant. From flagd/v0.15.5 (commit 651c7bb8, "handle
	// missing/null targeting keys").
	EmptyTargetingKeyDefault bool `json:"emptyTargetingKeyDefault"`
	// ZeroWeightDefault: a rule whose weights add up to 0 serves the
	// defaultVariant. Before, it picks the variant "", which no flag has:
	// the evaluation fails. From flagd/v0.15.5 (commit 670c91cd, "various
	// custom operator conformance fixes").
	ZeroWeightDefault bool `json:"zeroWeightDefault"`
}

// Bucketing maps a hash to a bucket.
type Bucketing string

const (
	// BucketingPercent: the absolute value of the signed 32-bit hash, as a
	// fraction of the largest one, times 100, against the buckets' shares
	// in percent. Every release before v0.15.0.
	BucketingPercent Bucketing = "percent"
	// BucketingWeights: the unsigned 32-bit hash times the total weight,
	// shifted right by 32, against the buckets' integer weights. From
	// flagd/v0.15.0 (commit 7190878f): the same targetingKey may land in
	// another bucket than before.
	BucketingWeights Bucketing = "weights32"
)

// semanticsOf is the Semantics of v.
func semanticsOf(v Version) Semantics {
	s := Semantics{Disabled: DisabledNotFound, NoDefaultVariant: NoDefaultRefused,
		Fractional: Fractional{Bucketing: BucketingPercent}}
	if v.AtLeast(V(0, 16, 0)) {
		s.Disabled = DisabledReason
	}
	switch {
	case v.AtLeast(V(0, 14, 0)):
		s.NoDefaultVariant = NoDefaultCodeDefault
	case v.AtLeast(V(0, 12, 6)):
		s.NoDefaultVariant = NoDefaultNotFound
	}
	f := &s.Fractional
	f.WeightsSumTo100 = !v.AtLeast(V(0, 11, 0))
	if v.AtLeast(V(0, 15, 0)) {
		f.Bucketing, f.IntegerWeights = BucketingWeights, true
	}
	f.SingleBucket = v.AtLeast(V(0, 15, 3))
	f.EmptyTargetingKeyDefault = v.AtLeast(V(0, 15, 5))
	f.ZeroWeightDefault = v.AtLeast(V(0, 15, 5))
	return s
}

// Unlike lists, in a few words each, what the release evaluates otherwise
// than the Reference: nothing for the Reference itself.
func (f *Facts) Unlike() []string {
	got, want := f.Semantics, semanticsOf(Reference)
	var out []string
	if got.Disabled != want.Disabled {
		out = append(out, "DISABLED flags")
	}
	if got.NoDefaultVariant != want.NoDefaultVariant {
		out = append(out, "flags without a defaultVariant")
	}
	if got.Fractional != want.Fractional {
		out = append(out, "fractional targeting")
	}
	return out
}
