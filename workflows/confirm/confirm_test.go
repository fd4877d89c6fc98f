package confirm

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

func flagSet(ns, name, variant string, keys ...string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = ns, name
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{}
	for _, k := range keys {
		ff.Spec.FlagSpec.Flags[k] = v1beta1.Flag{State: v1beta1.FlagStateEnabled,
			Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: variant}
	}
	return ff
}

// store is what flagd's store hands out of documents it loaded: each flag
// with its flag set's metadata merged in, keyed by flag key (a later
// document's flag of the same key hides an earlier one's).
func store(t *testing.T, docs ...string) []byte {
	t.Helper()
	flags := map[string]any{}
	for _, d := range docs {
		var doc struct {
			Flags    map[string]map[string]any `json:"flags"`
			Metadata map[string]any            `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(d), &doc); err != nil {
			t.Fatal(err)
		}
		for k, f := range doc.Flags {
			md := map[string]any{}
			for mk, mv := range doc.Metadata {
				md[mk] = mv
			}
			if own, ok := f["metadata"].(map[string]any); ok {
				for mk, mv := range own {
					md[mk] = mv
				}
			}
			f["metadata"] = md
			flags[k] = f
		}
	}
	b, _ := json.Marshal(map[string]any{"flags": flags})
	return b
}

func serve(t *testing.T, ff *v1beta1.FeatureFlag) (string, string) {
	t.Helper()
	content, revision, err := flagsets.Serve(ff)
	if err != nil {
		t.Fatal(err)
	}
	return content, revision
}

func TestConfirm(t *testing.T) {
	g := NewWithT(t)
	off, offRev := serve(t, flagSet("shop", "checkout", "off", "a", "b"))
	_, onRev := serve(t, flagSet("shop", "checkout", "on", "a", "b"))
	search, searchRev := serve(t, flagSet("web", "search", "on", "c"))

	s, err := Parse(store(t, off, search, `{"flags":{"d":{"state":"ENABLED","variants":{"x":1},"defaultVariant":"x"}}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.FlagSets).To(Equal(map[string]FlagSet{
		"shop/checkout": {Flags: 2, Revisions: []string{offRev}},
		"web/search":    {Flags: 1, Revisions: []string{searchRev}},
	}))
	g.Expect(s.Unnamed).To(Equal(1))

	g.Expect(s.Confirm("shop/checkout", offRev, 2)).To(BeTrue())
	ok, why := s.Confirm("shop/checkout", onRev, 2)
	g.Expect(ok).To(BeFalse(), "flagd still serves the revision before")
	g.Expect(why).To(Equal("flagd serves revision " + offRev[:12] + " of FeatureFlag shop/checkout"))
	ok, why = s.Confirm("shop/other", searchRev, 1)
	g.Expect(ok).To(BeFalse())
	g.Expect(why).To(Equal("flagd serves no flag of FeatureFlag shop/other"))
	g.Expect(s.Confirm("shop/empty", "any", 0)).To(BeTrue(), "a flag set without flags: nothing of it to serve")

	// Another flag set's flag under one of its keys: flagd serves a
	// mixture, not the revision.
	on, _ := serve(t, flagSet("shop", "checkout", "on", "a", "b"))
	mixed, _ := serve(t, flagSet("shop", "checkout", "off", "b"))
	s, err = Parse(store(t, on, mixed))
	g.Expect(err).NotTo(HaveOccurred())
	ok, why = s.Confirm("shop/checkout", onRev, 2)
	g.Expect(ok).To(BeFalse())
	g.Expect(why).To(Equal("flagd serves flags of FeatureFlag shop/checkout from 2 revisions"))
}

// What is not flagd's answer confirms nothing.
func TestParseRefuses(t *testing.T) {
	g := NewWithT(t)
	for _, answer := range []string{``, `[]`, `{}`, `{"flags":[]}`, `<html>`} {
		_, err := Parse([]byte(answer))
		g.Expect(err).To(HaveOccurred(), answer)
	}
	s, err := Parse([]byte(`{"flags":{"a":{"metadata":{"flagplane.dev/flagSet":1,"flagplane.dev/revision":"r"}}}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Unnamed).To(Equal(1), "a name that is no string names nothing")
}
