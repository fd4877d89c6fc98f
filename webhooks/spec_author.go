package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
)

// SpecAuthorPath is where SpecAuthor is served; config/webhook points the
// FeatureFlag webhook of the MutatingWebhookConfiguration there.
const SpecAuthorPath = "/mutate-core-openfeature-dev-v1beta1-featureflag"

// SpecAuthor is the FeatureFlag mutating webhook that keeps who wrote a
// flag set's spec in the API server's own word: on a create, and on an
// update that changes the spec, it sets the SpecAuthorAnnotation to the
// request's user (userInfo.username, whom the API server authenticated);
// on an update that leaves the spec as it was, it puts back the old value
// (or takes away one the old object did not have), so that nobody can
// write the annotation by hand. The revision history records it as a
// revision's createdBy; the field manager a client names is only what it
// says of itself.
//
// It writes nothing anywhere: its answer is the patch, on a dry run too.
//
// Setup serves it behind the FeatureFlag validator's budget (budgeted):
// the API server sends it the same requests, old objects too, and as many
// at once.
type SpecAuthor struct{}

var _ admission.Handler = SpecAuthor{}

// authored is what SpecAuthor reads of a FeatureFlag: whether it has
// metadata, its annotations and its spec as raw JSON.
type authored struct {
	hasMetadata bool
	annotations map[string]string
	spec        json.RawMessage
}

// decodeAuthored reads raw's metadata.annotations and spec, by their exact
// names (encoding/json would take "Metadata" for "metadata").
func decodeAuthored(raw []byte) (authored, error) {
	var a authored
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return a, err
	}
	if top == nil {
		return a, errors.New("not an object")
	}
	a.spec = top["spec"]
	meta, ok := top["metadata"]
	if !ok || string(meta) == "null" {
		return a, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(meta, &fields); err != nil {
		return a, fmt.Errorf("metadata: %w", err)
	}
	a.hasMetadata = true
	if raw, ok := fields["annotations"]; ok {
		if err := json.Unmarshal(raw, &a.annotations); err != nil {
			return a, fmt.Errorf("metadata.annotations: %w", err)
		}
	}
	return a, nil
}

// sameSpec tells whether two specs are the same JSON value. The API server
// encodes the old and the new object alike, so an unchanged spec is most
// often the same bytes, compared at once; else they are compared as
// values (members in any order, the last of a repeated name), numbers as
// written: two specs that differ only in a digit past float64's precision
// are two specs. Each is read as a stream into a digest (specDigest), not
// into a tree of values, which would hold some 30 times its bytes
// (BenchmarkConcurrentBoundAdmissions).
func sameSpec(a, b json.RawMessage) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	x, err := specDigest(a)
	if err != nil {
		return false, err
	}
	y, err := specDigest(b)
	if err != nil {
		return false, err
	}
	return x == y, nil
}

// specDigest is the SHA-256 digest of a JSON value that two values share
// when they are equal as values: an object's members are digested by name
// and in the order of their names, a repeated name counting once with its
// last value; a number as written. An absent spec (no bytes) is null.
//
// raw is read by a scanner of its own, which takes it for valid JSON: it
// is checked whole first (json.Valid; decodeAuthored has also decoded the
// object it is part of), which also bounds its nesting, and so the
// scanner's recursion, at encoding/json's 10,000 levels.
func specDigest(raw json.RawMessage) ([sha256.Size]byte, error) {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if !json.Valid(raw) {
		return [sha256.Size]byte{}, errors.New("not valid JSON")
	}
	d := digester{raw: raw}
	sum, err := d.value()
	if err == nil && d.skipSpace() < len(d.raw) {
		err = errors.New("data after the value")
	}
	return sum, err
}

// digester reads the valid JSON raw from pos.
type digester struct {
	raw []byte
	pos int
}

func (d *digester) skipSpace() int {
	for d.pos < len(d.raw) && (d.raw[d.pos] == ' ' || d.raw[d.pos] == '\t' || d.raw[d.pos] == '\n' || d.raw[d.pos] == '\r') {
		d.pos++
	}
	return d.pos
}

// value reads one value and digests it, each kind of value with a tag of
// its own.
func (d *digester) value() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h := sha256.New()
	switch d.raw[d.skipSpace()] {
	case '[':
		d.pos++
		h.Write([]byte{'['})
		for d.raw[d.skipSpace()] != ']' {
			v, err := d.value()
			if err != nil {
				return sum, err
			}
			h.Write(v[:])
			if d.raw[d.skipSpace()] == ',' {
				d.pos++
			}
		}
		d.pos++
	case '{':
		d.pos++
		members := map[string][sha256.Size]byte{}
		for d.raw[d.skipSpace()] != '}' {
			name, err := d.string()
			if err != nil {
				return sum, err
			}
			d.skipSpace()
			d.pos++ // the colon
			v, err := d.value()
			if err != nil {
				return sum, err
			}
			members[name] = v
			if d.raw[d.skipSpace()] == ',' {
				d.pos++
			}
		}
		d.pos++
		h.Write([]byte{'{'})
		for _, name := range slices.Sorted(maps.Keys(members)) {
			v := members[name]
			h.Write(binary.AppendUvarint(nil, uint64(len(name))))
			h.Write([]byte(name))
			h.Write(v[:])
		}
	case '"':
		str, err := d.string()
		if err != nil {
			return sum, err
		}
		h.Write([]byte{'s'})
		h.Write([]byte(str))
	default: // a number as written, true, false or null
		start := d.pos
		for d.pos < len(d.raw) && !strings.ContainsRune(" \t\n\r,]}", rune(d.raw[d.pos])) {
			d.pos++
		}
		h.Write([]byte{'l'})
		h.Write(d.raw[start:d.pos])
	}
	h.Sum(sum[:0])
	return sum, nil
}

// string reads a string, and returns it as encoding/json decodes it (its
// escapes read, each invalid byte U+FFFD).
func (d *digester) string() (string, error) {
	start := d.pos
	plain := true
	for d.pos++; d.raw[d.pos] != '"'; d.pos++ {
		if d.raw[d.pos] == '\\' {
			plain = false
			d.pos++
		}
	}
	d.pos++
	quoted := d.raw[start:d.pos]
	if plain && utf8.Valid(quoted) {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err
}

// Handle answers a create or update of a FeatureFlag with the patch that
// makes its SpecAuthorAnnotation right, if it is not.
func (SpecAuthor) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(string(req.Operation) + " is not authored")
	}
	ff, err := decodeAuthored(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the object: %w", err))
	}
	// What the annotation should be: the user's, or, when the spec does
	// not change, the old object's (absent when it had none).
	author, wanted := req.UserInfo.Username, req.UserInfo.Username != ""
	if req.Operation == admissionv1.Update {
		old, err := decodeAuthored(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old object: %w", err))
		}
		same, err := sameSpec(ff.spec, old.spec)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the spec: %w", err))
		}
		if same {
			author, wanted = old.annotations[deliveryv1alpha1.SpecAuthorAnnotation]
		}
	}
	have, has := ff.annotations[deliveryv1alpha1.SpecAuthorAnnotation]
	// Constant messages: the user's name is the annotation's, not the log's.
	switch {
	case !wanted && !has:
		return admission.Allowed("no spec author")
	case !wanted:
		return admission.Patched("spec author removed: the API server's to write",
			jsonpatch.NewOperation("remove", annotationPath(deliveryv1alpha1.SpecAuthorAnnotation), nil))
	case has && have == author:
		return admission.Allowed("spec author unchanged")
	case !ff.hasMetadata:
		return admission.Patched("spec author set",
			jsonpatch.NewOperation("add", "/metadata", map[string]any{"annotations": map[string]string{deliveryv1alpha1.SpecAuthorAnnotation: author}}))
	case ff.annotations == nil:
		return admission.Patched("spec author set",
			jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{deliveryv1alpha1.SpecAuthorAnnotation: author}))
	default:
		return admission.Patched("spec author set",
			jsonpatch.NewOperation("add", annotationPath(deliveryv1alpha1.SpecAuthorAnnotation), author))
	}
}

// annotationPath is the JSON pointer (RFC 6901) of an annotation.
func annotationPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
