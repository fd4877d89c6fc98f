package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
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

// authored is what SpecAuthor reads of a FeatureFlag: its annotations and
// its spec, whatever the spec holds.
type authored struct {
	Metadata *struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec any `json:"spec"`
}

// annotations are the object's annotations; nil when it has none.
func (a authored) annotations() map[string]string {
	if a.Metadata == nil {
		return nil
	}
	return a.Metadata.Annotations
}

// Handle answers a create or update of a FeatureFlag with the patch that
// makes its SpecAuthorAnnotation right, if it is not.
func (SpecAuthor) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(string(req.Operation) + " is not authored")
	}
	var ff, old authored
	if err := decodeExact(req.Object.Raw, &ff); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the object: %w", err))
	}
	// What the annotation should be: the user's, or, when the spec does
	// not change, the old object's (absent when it had none).
	author, wanted := req.UserInfo.Username, req.UserInfo.Username != ""
	if req.Operation == admissionv1.Update {
		if err := decodeExact(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old object: %w", err))
		}
		if reflect.DeepEqual(ff.Spec, old.Spec) {
			author, wanted = old.annotations()[deliveryv1alpha1.SpecAuthorAnnotation]
		}
	}
	have, has := ff.annotations()[deliveryv1alpha1.SpecAuthorAnnotation]
	// Constant messages: the user's name is the annotation's, not the log's.
	switch {
	case !wanted && !has:
		return admission.Allowed("no spec author")
	case !wanted:
		return admission.Patched("spec author removed: the API server's to write",
			jsonpatch.NewOperation("remove", annotationPath(deliveryv1alpha1.SpecAuthorAnnotation), nil))
	case has && have == author:
		return admission.Allowed("spec author unchanged")
	case ff.Metadata == nil:
		return admission.Patched("spec author set",
			jsonpatch.NewOperation("add", "/metadata", map[string]any{"annotations": map[string]string{deliveryv1alpha1.SpecAuthorAnnotation: author}}))
	case ff.Metadata.Annotations == nil:
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
