package flagdversion_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagdversion"
)

func flagSpec(t *testing.T, doc string) *v1beta1.FlagSpec {
	t.Helper()
	spec := &v1beta1.FlagSpec{}
	if err := json.Unmarshal([]byte(doc), spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestDifferences: a flag set is told apart only where the injected
// release evaluates it otherwise than the Reference, naming the flag and
// the behaviour.
func TestDifferences(t *testing.T) {
	const (
		disabled     = `{"flags":{"beta":{"state":"DISABLED","variants":{"on":true,"off":false},"defaultVariant":"off"}}}`
		noDefault    = `{"flags":{"nodef":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":""}}}`
		byKey        = `{"flags":{"split":{"state":"ENABLED","variants":{"a":"a","b":"b"},"defaultVariant":"a","targeting":{"fractional":[["a",50],["b",50]]}}}}`
		byExpression = `{"flags":{"split":{"state":"ENABLED","variants":{"a":"a","b":"b"},"defaultVariant":"a","targeting":{"fractional":[{"var":"email"},["a",50],["b",50]]}}}}`
		viaRef       = `{"flags":{"split":{"state":"ENABLED","variants":{"a":"a","b":"b"},"defaultVariant":"a","targeting":{"if":[true,{"$ref":"ab"},null]}}},` +
			`"$evaluators":{"ab":{"fractional":[["a",1],["b",3]]}}}`
		oddWeights = `{"flags":{"split":{"state":"ENABLED","variants":{"a":"a","b":"b"},"defaultVariant":"a","targeting":{"fractional":[{"var":"id"},["a",12.5],["b",-1]]}}}}`
		oneBucket  = `{"flags":{"all":{"state":"ENABLED","variants":{"a":"a"},"defaultVariant":"a","targeting":{"fractional":[["a",1]]}}}}`
		zero       = `{"flags":{"none":{"state":"ENABLED","variants":{"a":"a","b":"b"},"defaultVariant":"a","targeting":{"fractional":[{"var":"id"},["a",0],["b",0]]}}}}`
		plain      = `{"flags":{"on":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on","targeting":{"if":[{"==":[{"var":"x"},1]},"on","off"]}}}}`
	)
	type diff struct{ flag, behaviour string }
	for _, tc := range []struct {
		name, tag, spec string
		want            []diff
		message         string
	}{
		{"the reference differs from nothing", "v0.16.0", disabled + "", nil, ""},
		{"v0.16.1 evaluates as v0.16.0", "v0.16.1", disabled, nil, ""},
		{"an unvouched tag has no known semantics", "latest", disabled, nil, ""},
		{"a flag set with none of them", "v0.10.0", plain, nil, ""},

		{"DISABLED under v0.15.4", "v0.15.4", disabled, []diff{{"beta", flagdversion.BehaviourDisabled}},
			"spec.flagSpec.flags[beta]: DISABLED: flagd v0.15.4 (--sidecar-tag) answers its evaluations with the error FLAG_NOT_FOUND and leaves it out of bulk evaluations; " +
				"flagd v0.16.0 resolves it with reason DISABLED and no value (SDKs return the caller's default) and lists it in bulk evaluations"},

		{"no defaultVariant under v0.15.4: the same", "v0.15.4", noDefault, nil, ""},
		{"no defaultVariant under v0.13.3", "v0.13.3", noDefault, []diff{{"nodef", flagdversion.BehaviourNoDefaultVariant}},
			"spec.flagSpec.flags[nodef]: no defaultVariant: flagd v0.13.3 (--sidecar-tag) answers an evaluation its targeting does not settle with the error FLAG_NOT_FOUND; " +
				"flagd v0.16.0 resolves an evaluation its targeting does not settle with reason DEFAULT and no value (SDKs return the caller's default; flagd.evaluation.v1 callers still get FLAG_NOT_FOUND)"},
		{"no defaultVariant under v0.12.5", "v0.12.5", noDefault, []diff{{"nodef", flagdversion.BehaviourNoDefaultVariant}},
			"spec.flagSpec.flags[nodef]: no defaultVariant: flagd v0.12.5 (--sidecar-tag) refuses the whole flag set, so that none of its flags is served; " +
				"flagd v0.16.0 resolves an evaluation its targeting does not settle with reason DEFAULT and no value (SDKs return the caller's default; flagd.evaluation.v1 callers still get FLAG_NOT_FOUND)"},

		{"fractional by targetingKey under v0.15.4: the empty key", "v0.15.4", byKey, []diff{{"split", flagdversion.BehaviourEmptyKey}},
			`spec.flagSpec.flags[split]: fractional with an empty targetingKey: the rule buckets by the targetingKey: for an evaluation whose targetingKey is "", ` +
				"flagd v0.15.4 (--sidecar-tag) buckets it by the flag key alone, so that all such evaluations get one variant; flagd v0.16.0 serves the defaultVariant"},
		{"fractional by an expression under v0.15.4: the same", "v0.15.4", byExpression, nil, ""},
		{"fractional under v0.14.5: bucketing", "v0.14.5", byExpression, []diff{{"split", flagdversion.BehaviourBucketing}},
			"spec.flagSpec.flags[split]: fractional bucketing: flagd v0.14.5 (--sidecar-tag) maps the hash of the bucketing value to a bucket by percent shares, " +
				"flagd v0.16.0 by 32-bit integer weights: the same targetingKey may get another variant"},
		{"fractional through $ref under v0.14.5", "v0.14.5", viaRef,
			[]diff{{"split", flagdversion.BehaviourBucketing}, {"split", flagdversion.BehaviourEmptyKey}}, ""},
		{"weights not adding up to 100 under v0.10.3", "v0.10.3", viaRef,
			[]diff{{"split", flagdversion.BehaviourBucketing}, {"split", flagdversion.BehaviourWeights}, {"split", flagdversion.BehaviourEmptyKey}}, ""},
		{"weights adding up to 100 under v0.10.3", "v0.10.3", byExpression, []diff{{"split", flagdversion.BehaviourBucketing}}, ""},
		{"odd weights under v0.14.5", "v0.14.5", oddWeights, []diff{
			{"split", flagdversion.BehaviourBucketing}, {"split", flagdversion.BehaviourWeights}, {"split", flagdversion.BehaviourWeights}}, ""},
		{"one bucket under v0.15.2", "v0.15.2", oneBucket, []diff{{"all", flagdversion.BehaviourSingleBucket}, {"all", flagdversion.BehaviourEmptyKey}},
			"spec.flagSpec.flags[all]: fractional with one bucket: flagd v0.15.2 (--sidecar-tag) needs at least two arguments to fractional: " +
				"a rule of one bucket fails and the defaultVariant is served; flagd v0.16.0 puts every evaluation into the one bucket"},
		{"weights of 0 under v0.15.4", "v0.15.4", zero, []diff{{"none", flagdversion.BehaviourZeroWeights}},
			"spec.flagSpec.flags[none]: fractional weights adding up to 0: flagd v0.15.4 (--sidecar-tag) picks no variant and answers with an error; flagd v0.16.0 serves the defaultVariant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := flagdversion.Differences(flagSpec(t, tc.spec), flagdversion.Resolve("--sidecar-tag", tc.tag))
			var gotDiffs []diff
			for _, d := range got {
				gotDiffs = append(gotDiffs, diff{d.Flag, d.Behaviour})
			}
			g.Expect(gotDiffs).To(Equal(tc.want))
			if tc.message != "" {
				g.Expect(got[0].Message).To(Equal(tc.message))
			}
		})
	}
}

// TestDifferencesWeights: what each release makes of an odd weight.
func TestDifferencesWeights(t *testing.T) {
	g := NewWithT(t)
	const odd = `{"flags":{"split":{"state":"ENABLED","variants":{"a":"a","b":"b"},"defaultVariant":"a","targeting":{"fractional":[{"var":"id"},["a",12.5],["b",-1]]}}}}`
	got := flagdversion.Differences(flagSpec(t, odd), flagdversion.Resolve("--flagd-tag", "v0.14.5"))
	g.Expect(got).To(HaveLen(3))
	g.Expect(got[1].Message).To(Equal("spec.flagSpec.flags[split]: fractional weights: weight 12.5 of bucket 0: flagd v0.14.5 (--flagd-tag) truncates it to 12; " +
		"flagd v0.16.0 makes the rule fail and serves the defaultVariant"))
	g.Expect(got[2].Message).To(Equal("spec.flagSpec.flags[split]: fractional weights: weight -1 of bucket 1: flagd v0.14.5 (--flagd-tag) subtracts it from the total weight; " +
		"flagd v0.16.0 counts it as 0"))
}

// FuzzDifferences: any flag set, under any release, is told apart without a panic.
func FuzzDifferences(f *testing.F) {
	for _, seed := range []string{
		`{"flags":{"a":{"state":"DISABLED","variants":{},"defaultVariant":"","targeting":{"fractional":[]}}}}`,
		`{"flags":{"a":{"state":"ENABLED","variants":{},"defaultVariant":"","targeting":{"$ref":"x"}}},"$evaluators":{"x":{"$ref":"x"}}}`,
		`{"flags":{"a":{"state":"ENABLED","variants":{},"defaultVariant":"","targeting":{"fractional":[null,[],[1],["a","b"],["a",1e300]]}}}}`,
		`{"flags":{"a":{"targeting":[{"fractional":{"fractional":[["a"]]}}]}},"$evaluators":[1]}`,
	} {
		f.Add(seed, "v0.10.0")
		f.Add(seed, "v0.14.5")
	}
	f.Fuzz(func(t *testing.T, doc, tag string) {
		spec := &v1beta1.FlagSpec{}
		if json.Unmarshal([]byte(doc), spec) != nil {
			return
		}
		for _, d := range flagdversion.Differences(spec, flagdversion.Resolve("--sidecar-tag", tag)) {
			if d.Behaviour == "" || !strings.Contains(d.Message, "flags["+d.Flag+"]: "+d.Behaviour) {
				t.Fatalf("a difference that does not name its flag and behaviour: %+v", d)
			}
		}
	})
}
