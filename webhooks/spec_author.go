package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

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
// values, numbers as written: two specs that differ only in a digit past
// float64's precision are two specs.
func sameSpec(a, b json.RawMessage) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	var x, y any
	if len(a) > 0 {
		if err := decodeExact(a, &x); err != nil {
			return false, err
		}
	}
	if len(b) > 0 {
		if err := decodeExact(b, &y); err != nil {
			return false, err
		}
	}
	return reflect.DeepEqual(x, y), nil
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

// decodeExact decodes JSON keeping numbers as they were written: two specs
// that differ only in a digit past float64's precision are two specs.
func decodeExact(raw []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(into)
}

// annotationPath is the JSON pointer (RFC 6901) of an annotation.
func annotationPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
