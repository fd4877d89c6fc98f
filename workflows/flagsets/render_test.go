package flagsets

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Render is json.Marshal of the spec, byte for byte: the revisions of
// every flag set recorded before Serve existed stay what they were.
func TestRenderIsTheSpecMarshalled(t *testing.T) {
	for name, md := range map[string]string{
		"none": "", "empty": `{}`, "null": `null`, "keys": `{ "team": "pay", "owner": "<a&b>", "n": 1 }`,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ff := flagSet(map[string]v1beta1.Flag{"f": boolFlag(), "g": boolFlag()}, `{"x": {"in": ["a", "<b>"]}}`)
			if md != "" {
				ff.Spec.FlagSpec.Metadata = json.RawMessage(md)
			}
			want, err := json.Marshal(ff.Spec.FlagSpec)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := Render(ff)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(string(want)))
		})
	}
}

// What Serve writes is a flagd document whose metadata is the flag set's
// own, then flagplane's two keys; its revision is Render's hash, whatever
// the stamp.
func TestServe(t *testing.T) {
	for name, tc := range map[string]struct{ md, want string }{
		"none":  {"", `{"flagplane.dev/flagSet":"shop/flags","flagplane.dev/revision":"R"}`},
		"empty": {`{}`, `{"flagplane.dev/flagSet":"shop/flags","flagplane.dev/revision":"R"}`},
		"null":  {`null`, `{"flagplane.dev/flagSet":"shop/flags","flagplane.dev/revision":"R"}`},
		"keys":  {`{"team":"pay","n":1}`, `{"team":"pay","n":1,"flagplane.dev/flagSet":"shop/flags","flagplane.dev/revision":"R"}`},
		// A key of flagplane's that the flag set wrote is left out:
		// never a second, earlier copy that a reader might take.
		"reserved": {`{"flagplane.dev/revision":"forged","team":"pay"}`, `{"team":"pay","flagplane.dev/flagSet":"shop/flags","flagplane.dev/revision":"R"}`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ff := flagSet(map[string]v1beta1.Flag{"f": boolFlag()}, "")
			if tc.md != "" {
				ff.Spec.FlagSpec.Metadata = json.RawMessage(tc.md)
			}
			content, revision, err := Serve(ff)
			g.Expect(err).NotTo(HaveOccurred())
			rendered, err := Render(ff)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(revision).To(Equal(Revision(rendered)))

			var doc struct {
				Flags    map[string]v1beta1.Flag `json:"flags"`
				Metadata json.RawMessage         `json:"metadata"`
			}
			g.Expect(json.Unmarshal([]byte(content), &doc)).To(Succeed(), content)
			g.Expect(string(doc.Metadata)).To(Equal(replaceR(tc.want, revision)))
			g.Expect(doc.Flags).To(HaveKey("f"))
			g.Expect(ServedRevision(content)).To(Equal(revision))
		})
	}
}

// A flag's own flagplane keys are left out of what is served: flagd merges
// a flag's metadata over the set's, so such a key would hide flagplane's.
func TestServeLeavesOutAFlagsReservedKeys(t *testing.T) {
	g := NewWithT(t)
	f := boolFlag()
	f.Metadata = json.RawMessage(`{"flagplane.dev/revision":"forged","flagplane.dev/flagSet":"other/flags","owner":"pay"}`)
	ff := flagSet(map[string]v1beta1.Flag{"f": f, "g": boolFlag()}, "")
	content, revision, err := Serve(ff)
	g.Expect(err).NotTo(HaveOccurred())
	var doc v1beta1.FlagSpec
	g.Expect(json.Unmarshal([]byte(content), &doc)).To(Succeed())
	g.Expect(string(doc.Flags["f"].Metadata)).To(Equal(`{"owner":"pay"}`))
	g.Expect(doc.Flags["g"].Metadata).To(BeEmpty())
	g.Expect(ServedRevision(content)).To(Equal(revision))
	g.Expect(ff.Spec.FlagSpec.Flags["f"].Metadata).To(ContainSubstring("forged"), "the FeatureFlag is not changed")

	errs, warnings := ValidateFlagSpec(&ff.Spec.FlagSpec, nil)
	g.Expect(errs).To(BeEmpty())
	g.Expect(warnings).To(HaveLen(2))
	g.Expect(warnings[0].Field).To(Equal(`flags[f].metadata[flagplane.dev/flagSet]`))
	g.Expect(warnings[1].Error()).To(ContainSubstring("keys under flagplane.dev/ are flagplane's"))
}

// ServedRevision reads no revision from what Serve did not write.
func TestServedRevisionOfOtherContent(t *testing.T) {
	g := NewWithT(t)
	for _, content := range []string{``, `{`, `{"flags":{}}`, `{"flags":{},"metadata":{"flagplane.dev/revision":1}}`, `{"flags":{},"metadata":null}`} {
		g.Expect(ServedRevision(content)).To(BeEmpty(), content)
	}
}

func replaceR(s, revision string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(s), &m)
	out := []byte(s)
	if _, ok := m[MetadataRevision]; ok {
		b, _ := json.Marshal(revision)
		out = []byte(string(out[:len(out)-len(`"R"}`)]) + string(b) + "}")
	}
	return string(out)
}

// RevisionOfServed reads back the revision of what Serve made, for every
// shape of metadata, and of nothing else.
func TestRevisionOfServed(t *testing.T) {
	for _, md := range []string{"", `{}`, `null`, `{"team":"pay"}`} {
		g := NewWithT(t)
		ff := flagSet(map[string]v1beta1.Flag{"f": boolFlag()}, "")
		if md != "" {
			ff.Spec.FlagSpec.Metadata = json.RawMessage(md)
		}
		content, revision, err := Serve(ff)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(RevisionOfServed(content, "shop", "flags")).To(Equal(revision), md)
		g.Expect(RevisionOfServed(content, "shop", "other")).To(BeEmpty(), "another flag set's name")
		edited := content[:len(`{"flags":{"f":{"state":"`)] + "DISABLED" + content[len(`{"flags":{"f":{"state":"ENABLED`):]
		g.Expect(ServedRevision(edited)).To(Equal(revision), "the edit keeps the stamp")
		g.Expect(RevisionOfServed(edited, "shop", "flags")).To(BeEmpty(), "an edit by hand is not the revision it names")
		rendered, err := Render(ff)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(RevisionOfServed(rendered, "shop", "flags")).To(BeEmpty(), "content written before revisions were served")
	}
	g := NewWithT(t)
	for _, content := range []string{"", `"flagplane.dev/revision":"`, `{"flags":{},"metadata":{"flagplane.dev/revision":"0123456789abcdef0123456789abcdef"}}`} {
		g.Expect(RevisionOfServed(content, "shop", "flags")).To(BeEmpty(), content)
	}
}

// A revision keeps 128 bits of the SHA-256 of a rendering: a pair of specs
// that share their first 48 bits (about 2^24 tries to find) are two
// revisions.
func TestRevisionHas128Bits(t *testing.T) {
	g := NewWithT(t)
	sum := sha256.Sum256([]byte(`{"flags":{}}`))
	g.Expect(Revision(`{"flags":{}}`)).To(Equal(hex.EncodeToString(sum[:16])))
	g.Expect(Revision(`{"flags":{}}`)).To(HaveLen(32))
}
