package realclients

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/inspect/evaluate"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
)

// flagplane diff --contexts says what flagd would serve with flagd's own
// evaluator linked into the CLI (inspect/evaluate). This holds it to
// the real flagd v0.16.0: the same flag sets, rendered as flagplane serves
// them, asked the same flags with the same contexts over flagd's HTTP API.
var _ = Describe("flagplane diff's evaluator", func() {
	It("answers every flag, for every context, as its own type and another, exactly as flagd v0.16.0 serves the same flag set", func() {
		var flagSets []*v1beta1.FeatureFlag
		for _, f := range []string{
			"testdata/targeting.yaml",
			// The CLI's golden diff: the flag sets before and after.
			"../../inspect/explain/testdata/shop.yaml",
			"../../cmd/flagplane/testdata/diff-evaluate.yaml",
		} {
			flagSets = append(flagSets, featureFlagsIn(f)...)
		}
		Expect(len(flagSets)).To(BeNumerically(">=", 5))
		contexts := evaluationContexts()

		otherType := map[evaluate.Type]evaluate.Type{evaluate.Boolean: evaluate.String, evaluate.String: evaluate.Boolean,
			evaluate.Number: evaluate.String, evaluate.Object: evaluate.Boolean}

		dir := GinkgoT().TempDir()
		compared := 0
		served := map[string]map[string]bool{} // flag -> variants flagd served
		for i, ff := range flagSets {
			doc, err := flagsets.Render(ff)
			Expect(err).NotTo(HaveOccurred())
			fs, err := evaluate.Load(doc)
			Expect(err).NotTo(HaveOccurred(), "%s/%s", ff.Namespace, ff.Name)
			path := filepath.Join(dir, fmt.Sprintf("flags-%d.json", i))
			Expect(os.WriteFile(path, []byte(doc), 0o644)).To(Succeed())
			f := startFlagd("--uri", "file:"+path)

			// flagd has read the file once it finds a flag that is there
			// for an empty context.
			keys := fs.Keys()
			loaded := ""
			for _, k := range keys {
				t, _ := fs.TypeOf(k)
				if fs.Resolve(k, t, nil).ErrorCode != "FLAG_NOT_FOUND" {
					loaded = k
					break
				}
			}
			Expect(loaded).NotTo(BeEmpty())
			t, _ := fs.TypeOf(loaded)
			Eventually(f.resolve(apiKind[t], loaded, nil)).ShouldNot(HaveField("Code", "not_found"), "flagd never loaded %s", path)

			for _, key := range append(keys, "no-such-flag") {
				own, ok := fs.TypeOf(key)
				if !ok {
					own = evaluate.Boolean
				}
				for _, typ := range []evaluate.Type{own, otherType[own]} {
					for _, c := range contexts {
						want, err := f.resolve(apiKind[typ], key, c.Context)()
						Expect(err).NotTo(HaveOccurred())
						Expect(asServed(fs.Resolve(key, typ, c.Context))).To(Equal(want),
							"flag %s of %s/%s asked as %s, context %s %v", key, ff.Namespace, ff.Name, typ, c.Name, c.Context)
						compared++
						if typ == own && want.Variant != "" {
							if served[key] == nil {
								served[key] = map[string]bool{}
							}
							served[key][want.Variant] = true
						}
					}
				}
			}
		}
		By(fmt.Sprintf("%d answers compared", compared))
		Expect(compared).To(BeNumerically(">", 1000))
		// The contexts reach every branch of the rules that matter most.
		Expect(served["rollout"]).To(HaveLen(3), "fractional: a, b and c")
		Expect(served["seeded-rollout"]).To(HaveLen(2), "fractional on $flagd.flagKey and email")
		Expect(served["region-color"]).To(HaveLen(3), "$ref, in, starts_with and the default")
		Expect(served["new-ui"]).To(HaveLen(2), "sem_ver")
		Expect(served["button-color"]).To(HaveLen(2), "the CLI's golden diff: fractional on targetingKey")
	})
})

// A source's contextValues and headerToContextMappings become flagd's
// --context-value and --context-from-header: flagd adds them to every
// request's context, over what the request sends. flagplane diff
// evaluates with the same merge (evaluate.Serving); this holds it to the
// real flagd, started with the args the sidecar gets.
var _ = Describe("flagplane diff's evaluator, for a flagd that adds to the context", func() {
	It("answers as flagd v0.16.0 does with static context values and mapped headers", func() {
		flagSets := featureFlagsIn("testdata/targeting.yaml")
		serving := evaluate.Serving{
			ContextValues:  map[string]string{"region": "eu", "appVersion": "2.9.9"},
			HeaderMappings: map[string]string{"X-Tier": "tier", "X-User-Email": "email"},
		}
		var args []string
		for _, k := range slices.Sorted(maps.Keys(serving.ContextValues)) {
			args = append(args, "--context-value", k+"="+serving.ContextValues[k])
		}
		for _, h := range slices.Sorted(maps.Keys(serving.HeaderMappings)) {
			args = append(args, "--context-from-header", h+"="+serving.HeaderMappings[h])
		}
		// What the sidecar's args say is what flagplane diff reads back.
		values, headers := injection.ContextArgs(append([]string{"start"}, args...))
		Expect(evaluate.Serving{ContextValues: values, HeaderMappings: headers}).To(Equal(serving))

		contexts := evaluationContexts()
		// Requests with headers: mapped ones (in any case), an empty one
		// (which flagd ignores), and one no flagd maps.
		for i, c := range contexts[:20] {
			with := evaluate.Context{Name: c.Name + "+headers", Context: c.Context, Headers: map[string]string{"x-tier": "gold", "X-Unmapped": "x"}}
			switch i % 3 {
			case 1:
				with.Headers["X-User-Email"] = "boss@faas.com"
			case 2:
				with.Headers["x-tier"] = ""
			}
			contexts = append(contexts, with)
		}

		dir := GinkgoT().TempDir()
		compared, differs := 0, 0
		for i, ff := range flagSets {
			doc, err := flagsets.Render(ff)
			Expect(err).NotTo(HaveOccurred())
			fs, err := evaluate.Load(doc)
			Expect(err).NotTo(HaveOccurred())
			path := filepath.Join(dir, fmt.Sprintf("flags-%d.json", i))
			Expect(os.WriteFile(path, []byte(doc), 0o644)).To(Succeed())
			f := startFlagd(append([]string{"--uri", "file:" + path}, args...)...)
			keys := fs.Keys()
			Expect(keys).NotTo(BeEmpty())
			t0, _ := fs.TypeOf(keys[0])
			Eventually(f.resolve(apiKind[t0], keys[0], nil)).ShouldNot(HaveField("Code", "not_found"), "flagd never loaded %s", path)
			for _, key := range keys {
				typ, _ := fs.TypeOf(key)
				for _, c := range contexts {
					want, err := f.resolveWithHeaders(apiKind[typ], key, c.Context, c.Headers)()
					Expect(err).NotTo(HaveOccurred())
					got := fs.Resolve(key, typ, serving.Merge(c))
					Expect(asServed(got)).To(Equal(want),
						"flag %s asked with context %s %v and headers %v", key, c.Name, c.Context, c.Headers)
					compared++
					if plain := fs.Resolve(key, typ, c.Context); plain.Variant != got.Variant {
						differs++
					}
				}
			}
		}
		By(fmt.Sprintf("%d answers compared, %d of them differ from the request's own context's", compared, differs))
		Expect(compared).To(BeNumerically(">", 300))
		Expect(differs).To(BeNumerically(">", 20), "the static values and headers must change answers, or this proves nothing")
	})
})

// One flagd serving several flag sets answers a key that several hold from
// the last of its --sources. flagplane diff models that (evaluate.Stack):
// this holds it to the real flagd, started with three file sources.
var _ = Describe("flagplane diff's evaluator, for a flagd that serves several flag sets", func() {
	It("answers from the last source that holds a key, as flagd v0.16.0 does", func() {
		edited := featureFlagsIn("../../cmd/flagplane/testdata/diff-evaluate.yaml")[0]
		doc, err := flagsets.Render(edited)
		Expect(err).NotTo(HaveOccurred())
		fs, err := evaluate.Load(doc)
		Expect(err).NotTo(HaveOccurred())
		keys := fs.Keys()
		Expect(len(keys)).To(BeNumerically(">=", 2))
		static := func(key, variant string) string {
			return `"` + key + `": {"state": "ENABLED", "variants": {"on": true, "off": false, "red": "#FF0000"}, "defaultVariant": "` + variant + `"}`
		}
		// The source before holds the flag set's first key and one of its
		// own; the source after holds its last key, as another type.
		lower := `{"flags": {` + static(keys[0], "off") + "," + static("lower-only", "on") + `}}`
		upper := `{"flags": {` + static(keys[len(keys)-1], "red") + `}}`

		dir := GinkgoT().TempDir()
		var sources []map[string]string
		for i, d := range []string{lower, doc, upper} {
			path := filepath.Join(dir, fmt.Sprintf("source-%d.json", i))
			Expect(os.WriteFile(path, []byte(d), 0o644)).To(Succeed())
			sources = append(sources, map[string]string{"uri": path, "provider": "file"})
		}
		sourcesJSON, err := json.Marshal(sources)
		Expect(err).NotTo(HaveOccurred())
		f := startFlagd("--sources", string(sourcesJSON))
		Eventually(f.resolve("Boolean", "lower-only", nil)).Should(HaveField("Variant", "on"), "flagd never loaded its sources")

		contexts := evaluationContexts()
		changes := evaluate.CompareStack(evaluate.Stack{Lower: []string{lower}, Upper: []string{upper}}, "", doc, contexts, evaluate.Serving{})
		Expect(changes.Shadowed).To(Equal([]string{keys[len(keys)-1]}))
		upperSet, err := evaluate.Load(upper)
		Expect(err).NotTo(HaveOccurred())
		compared := 0
		for _, c := range contexts {
			var changed []evaluate.FlagChange
			for _, cc := range changes.Contexts {
				if cc.Name == c.Name {
					changed = cc.Changed
				}
			}
			for _, key := range keys {
				typ, _ := fs.TypeOf(key)
				want := fs.Resolve(key, typ, c.Context) // as the flag set answers, when it is the one that answers
				if key == keys[len(keys)-1] {
					typ, _ = upperSet.TypeOf(key)
					want = upperSet.Resolve(key, typ, c.Context)
				} else {
					// Before the flag set existed, the source before answered
					// its first key: that change is listed with the answer now.
					for _, ch := range changed {
						if ch.Flag == key {
							want = ch.After
						}
					}
				}
				got, err := f.resolve(apiKind[typ], key, c.Context)()
				Expect(err).NotTo(HaveOccurred())
				Expect(got).To(Equal(asServed(want)), "flag %s, context %s", key, c.Name)
				compared++
			}
		}
		By(fmt.Sprintf("%d answers compared", compared))
	})
})

// apiKind names flagd's Resolve call of each type.
var apiKind = map[evaluate.Type]string{evaluate.Boolean: "Boolean", evaluate.String: "String", evaluate.Number: "Float", evaluate.Object: "Object"}

// asServed is a resolution as flagd's HTTP API answers it: an error as its
// Connect code.
func asServed(r evaluate.Resolution) evaluation {
	connectCode := map[string]string{
		"FLAG_NOT_FOUND": "not_found", "TYPE_MISMATCH": "invalid_argument", "PARSE_ERROR": "data_loss", "GENERAL": "unknown",
	}
	if r.ErrorCode != "" {
		Expect(connectCode).To(HaveKey(r.ErrorCode))
		return evaluation{Code: connectCode[r.ErrorCode]}
	}
	return evaluation{Value: r.Value, Variant: r.Variant, Reason: r.Reason}
}

// featureFlagsIn reads the FeatureFlags of a manifest file (other kinds are
// skipped).
func featureFlagsIn(path string) []*v1beta1.FeatureFlag {
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*v1beta1.FeatureFlag
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			Expect(err).NotTo(HaveOccurred(), path)
		}
		var meta struct{ Kind string }
		Expect(json.Unmarshal(raw, &meta)).To(Succeed())
		if meta.Kind != v1beta1.FeatureFlagKind {
			continue
		}
		ff := &v1beta1.FeatureFlag{}
		Expect(json.Unmarshal(raw, ff)).To(Succeed())
		out = append(out, ff)
	}
}

// evaluationContexts are the CLI's golden contexts, flagd's own fractional
// examples, an empty context and a spread of users.
func evaluationContexts() []evaluate.Context {
	data, err := os.ReadFile("../../cmd/flagplane/testdata/contexts.yaml")
	Expect(err).NotTo(HaveOccurred())
	contexts, err := evaluate.ParseContexts(data)
	Expect(err).NotTo(HaveOccurred())
	for _, email := range []string{"rachel@faas.com", "monica@faas.com", "joey@faas.com", "ross@faas.com"} {
		contexts = append(contexts, evaluate.Context{Name: email, Context: map[string]any{"email": email}})
	}
	contexts = append(contexts, evaluate.Context{Name: "empty", Context: map[string]any{}})
	domains := []string{"example.com", "example.org", "faas.com"}
	regions := []string{"eu", "uk", "ch", "us-east", "apac", ""}
	versions := []string{"2.1.0", "2.9.9", "3.0.0", "1.9.0", "not-a-version"}
	tiers := []string{"gold", "silver"}
	for i := range 40 {
		contexts = append(contexts, evaluate.Context{Name: fmt.Sprintf("user-%d", i), Context: map[string]any{
			"targetingKey": fmt.Sprintf("user-%d", i),
			"email":        fmt.Sprintf("u%d@%s", i, domains[i%len(domains)]),
			"region":       regions[i%len(regions)],
			"appVersion":   versions[i%len(versions)],
			"tier":         tiers[i%len(tiers)],
			"age":          float64(i * 3),
		}})
	}
	return contexts
}
