package flagsets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The metadata keys that flagplane adds to every flag set it serves. flagd
// merges flag-set metadata into each flag's metadata, so every evaluation
// of a flag answers with the FeatureFlag it came from and the revision of
// its content: an app can log them, a trace can carry them, and flagplane
// reads them back to confirm what a consumer's flagd serves.
const (
	// MetadataFlagSet names the FeatureFlag, "namespace/name".
	MetadataFlagSet = "flagplane.dev/flagSet"
	// MetadataRevision is the revision of its content (Revision): the
	// one status, history and rollout plans name.
	MetadataRevision = "flagplane.dev/revision"
	// ReservedMetadataPrefix starts the metadata keys that are flagplane's:
	// a flag set's own keys under it are left out of what it serves
	// (ValidateFlagSpec warns of them).
	ReservedMetadataPrefix = "flagplane.dev/"
)

// Render returns the flagd JSON document of a flag set as its spec says:
// its flags, $evaluators and metadata. encoding/json sorts map keys, so
// equal flag sets render to equal bytes. Its hash is the flag set's
// revision (Revision); what flagplane serves is Serve, which adds the
// revision to it.
func Render(ff *v1beta1.FeatureFlag) (string, error) {
	head, metadata, err := renderParts(ff, ff.Spec.FlagSpec)
	if err != nil {
		return "", err
	}
	return join(head, metadata), nil
}

// join is the document of renderParts' head and metadata.
func join(head, metadata []byte) string {
	if metadata == nil {
		return string(head) + "}"
	}
	return string(head) + `,"metadata":` + string(metadata) + "}"
}

// Serve returns the flagd JSON document that flagplane serves for a flag
// set — Render, with the flag set's name and revision in its metadata
// (MetadataFlagSet, MetadataRevision) — and that revision. A key of the
// flag set's own metadata under ReservedMetadataPrefix, of the set or of a
// flag, is left out: flagd's answers carry flagplane's values, never a
// copy a flag set wrote.
func Serve(ff *v1beta1.FeatureFlag) (content, revision string, err error) {
	head, metadata, err := renderParts(ff, ff.Spec.FlagSpec)
	if err != nil {
		return "", "", err
	}
	revision = revisionOf(head, metadata)
	if spec := ff.Spec.FlagSpec; reserved(spec) {
		if head, metadata, err = renderParts(ff, withoutReserved(spec)); err != nil {
			return "", "", err
		}
	}
	stamp, err := stampOf(ff.Namespace, ff.Name, revision)
	if err != nil {
		return "", "", fmt.Errorf("rendering flag set %s/%s: %w", ff.Namespace, ff.Name, err)
	}
	var b strings.Builder
	b.Grow(len(head) + len(metadata) + len(stamp) + 16)
	b.Write(head)
	b.WriteString(`,"metadata":`)
	switch {
	case len(metadata) < 2 || metadata[0] != '{' || string(metadata) == "{}":
		// None, or null (flagd reads both as none): the stamp alone. A
		// metadata that is no object is refused before it is served.
		b.Write(stamp)
	default:
		b.Write(metadata[:len(metadata)-1])
		b.WriteByte(',')
		b.Write(stamp[1:])
	}
	b.WriteByte('}')
	return b.String(), revision, nil
}

// stampOf is the metadata object of flagplane's keys for a flag set's
// revision.
func stampOf(namespace, name, revision string) ([]byte, error) {
	return json.Marshal(map[string]string{MetadataFlagSet: namespace + "/" + name, MetadataRevision: revision})
}

// RevisionOfServed is the revision of content that Serve made for flag set
// namespace/name: the revision the content names, once the content less
// flagplane's keys is shown to hash to it; "" when it does not (content
// Serve did not make, edited since, of another flag set, or of a flag set
// whose own reserved keys Serve left out). It reads no JSON: a ConfigMap's
// megabyte costs a hash.
func RevisionOfServed(content, namespace, name string) string {
	const key = `"` + MetadataRevision + `":"`
	i := strings.LastIndex(content, key)
	if i < 0 || len(content) < i+len(key)+2*RevisionBytes+1 {
		return ""
	}
	claimed := content[i+len(key) : i+len(key)+2*RevisionBytes]
	stamp, err := stampOf(namespace, name, claimed)
	if err != nil {
		return ""
	}
	var candidates []string
	if base, ok := strings.CutSuffix(content, `,"metadata":`+string(stamp)+"}"); ok {
		// The flag set had no metadata, or {}, or null: each renders
		// to the stamp alone.
		candidates = []string{base + "}", base + `,"metadata":{}}`, base + `,"metadata":null}`}
	} else if base, ok := strings.CutSuffix(content, ","+string(stamp[1:len(stamp)-1])+"}}"); ok {
		candidates = []string{base + "}}"}
	}
	for _, c := range candidates {
		if Revision(c) == claimed {
			return claimed
		}
	}
	return ""
}

// renderParts renders spec without its metadata, less the closing brace,
// and its metadata as encoding/json writes it within the document (nil
// when it has none): their join is json.Marshal of spec, byte for byte.
func renderParts(ff *v1beta1.FeatureFlag, spec v1beta1.FlagSpec) (head, metadata []byte, err error) {
	if spec.Flags == nil {
		// flagd requires the flags object even when it is empty.
		spec.Flags = map[string]v1beta1.Flag{}
	}
	if len(spec.Metadata) > 0 {
		if metadata, err = json.Marshal(spec.Metadata); err != nil {
			return nil, nil, fmt.Errorf("rendering flag set %s/%s: %w", ff.Namespace, ff.Name, err)
		}
	}
	spec.Metadata = nil
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("rendering flag set %s/%s: %w", ff.Namespace, ff.Name, err)
	}
	return b[:len(b)-1], metadata, nil
}

// reserved tells whether spec's metadata, of the set or of a flag, may
// hold a key under ReservedMetadataPrefix: the common case, none, is told
// without decoding anything.
func reserved(spec v1beta1.FlagSpec) bool {
	needle := []byte(`"` + ReservedMetadataPrefix)
	if bytes.Contains(spec.Metadata, needle) {
		return true
	}
	for _, f := range spec.Flags {
		if bytes.Contains(f.Metadata, needle) {
			return true
		}
	}
	return false
}

// withoutReserved is spec less the metadata keys under
// ReservedMetadataPrefix. A metadata that is no JSON object is kept as it
// is: it is refused before it is served.
func withoutReserved(spec v1beta1.FlagSpec) v1beta1.FlagSpec {
	spec.Metadata = reservedRemoved(spec.Metadata)
	flags := make(map[string]v1beta1.Flag, len(spec.Flags))
	for k, f := range spec.Flags {
		f.Metadata = reservedRemoved(f.Metadata)
		flags[k] = f
	}
	spec.Flags = flags
	return spec
}

func reservedRemoved(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"`+ReservedMetadataPrefix)) {
		return raw
	}
	var md map[string]json.RawMessage
	if err := json.Unmarshal(raw, &md); err != nil || md == nil {
		return raw
	}
	maps.DeleteFunc(md, func(k string, _ json.RawMessage) bool { return strings.HasPrefix(k, ReservedMetadataPrefix) })
	out, err := json.Marshal(md)
	if err != nil {
		return raw
	}
	return out
}

// ServedRevision reads the revision that a document Serve made names
// (MetadataRevision of its flag-set metadata), "" when it names none. It
// is what the document claims: only Serve's output for that revision
// proves it.
func ServedRevision(content string) string {
	var doc struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(content), &doc); err != nil {
		return ""
	}
	var rev string
	if err := json.Unmarshal(doc.Metadata[MetadataRevision], &rev); err != nil {
		return ""
	}
	return rev
}

// revisionOf is Revision(join(head, metadata)), without the copy.
func revisionOf(head, metadata []byte) string {
	h := sha256.New()
	h.Write(head)
	if metadata != nil {
		h.Write([]byte(`,"metadata":`))
		h.Write(metadata)
	}
	h.Write([]byte("}"))
	return hex.EncodeToString(h.Sum(nil)[:RevisionBytes])
}

// RevisionBytes is how many bytes of the SHA-256 of a rendering its
// revision keeps: 128 bits, 32 hex digits (topology.ShortRevision shows
// the first 12 of them).
const RevisionBytes = 16

// Revision is the content hash of a flag set's flagd document (Render): the
// content its generated ConfigMaps hold, once up to date, but for the
// revision Serve adds. It names the content in status, in history and in
// rollout plans, so it must tell any two contents apart: 128 bits of
// SHA-256 (see topology.SameRevision for the 48-bit revisions of earlier
// versions).
func Revision(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:RevisionBytes])
}
