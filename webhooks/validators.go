package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/blast"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
)

// FlagSetValidator is the FeatureFlag validating webhook: flagd's flag
// schema plus flagplane's semantic rules (flagsets.ValidateFlagSpec). It
// refuses what flagd cannot load and what the OpenFeature Operator refuses,
// and admits what is probably a mistake with warnings, which kubectl prints
// (refused too when Strict). Setup serves it behind a budget of the bytes
// judged at once (budgeted).
type FlagSetValidator struct {
	// Strict refuses flag sets with warnings (--strict-validation).
	Strict bool
	// Disabled admits every flag set (--flags-validation=false, the
	// OpenFeature Operator's managerConfig.flagsValidationEnabled false);
	// what flagd cannot load is still not served, and its status says why.
	Disabled bool
	// Graph, when set and built, adds the change's blast radius to the
	// warnings of an admitted flag set (blast.OfFlagSet), and tells
	// whether consumers read it with a provider too small for it
	// (flagSetSizes).
	Graph Graph
	// Flagd are the flagd releases flagplane injects (the sidecar's, a
	// Flagd's): a flag set that one of them evaluates otherwise than flagd
	// v0.16.0 gets a warning per flag and behaviour (flagdVersionWarnings),
	// whatever the strictness: it is not a mistake in the flag set.
	Flagd []flagdversion.Injected
}

// maxVersionWarnings bounds the warnings about flagd releases of one
// admission, so that a large flag set gets a readable answer.
const maxVersionWarnings = 20

// flagdVersionWarnings says which flags of ff the injected flagd releases
// evaluate otherwise than flagd v0.16.0, and how (flagdversion.Differences).
func (v *FlagSetValidator) flagdVersionWarnings(ff *v1beta1.FeatureFlag) []string {
	var out []string
	for _, in := range v.Flagd {
		for _, d := range flagdversion.Differences(&ff.Spec.FlagSpec, in) {
			out = append(out, d.Message)
		}
	}
	if len(out) > maxVersionWarnings {
		out = append(out[:maxVersionWarnings], fmt.Sprintf("and %d more flags that the injected flagd evaluates otherwise than flagd %s",
			len(out)-maxVersionWarnings, flagdversion.Reference))
	}
	return out
}

var _ admission.Handler = (*FlagSetValidator)(nil)

// Handle validates a create or update of a FeatureFlag.
func (v *FlagSetValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	var ff, old v1beta1.FeatureFlag
	if resp, done := decodeForValidation(req, &ff, &old); done {
		return resp
	}
	if req.Operation == admissionv1.Update && reflect.DeepEqual(ff.Spec, old.Spec) {
		return admission.Allowed("spec unchanged")
	}
	if ff.Namespace == "" {
		ff.Namespace = req.Namespace
	}
	key := topology.FlagSetKey(ff.Namespace, ff.Name)
	if v.Disabled {
		// Sizes are told, not refused: the operator turned judging off.
		var sized topology.Rendered
		if content, _, err := flagsets.Serve(&ff); err == nil {
			sized = topology.Rendered{Content: content, Size: len(content)}
		}
		reach := v.reach(&ff, nil)
		_, sizeWarnings := flagSetSizes(key, sized, reach, false)
		return admission.Allowed("flag set validation is off").WithWarnings(append(append(v.flagdVersionWarnings(&ff), sizeWarnings...), summary(reach)...)...)
	}
	errs, warnings := flagsets.ValidateFlagSpec(&ff.Spec.FlagSpec, field.NewPath("spec", "flagSpec"))
	// What the graph will render of it, from this validation.
	served := flagsets.NewValidator(v.Strict).Rendered(&ff, errs, warnings)
	if v.Strict {
		errs = append(errs, warnings...)
		warnings = nil
	}
	msgs := make([]string, len(warnings))
	for i, w := range warnings {
		msgs[i] = readableError(w).Error()
	}
	msgs = capWarnings(msgs) // the blast radius and flagd's releases still follow
	if len(errs) == 0 {
		// Too large for what reads it: refused (sizes.go); else it is
		// admitted, with what it reaches.
		reach := v.reach(&ff, &served)
		sizeErrs, sizeWarnings := flagSetSizes(key, served, reach, true)
		errs = append(errs, sizeErrs...)
		msgs = append(append(msgs, sizeWarnings...), v.flagdVersionWarnings(&ff)...)
		if len(sizeErrs) == 0 {
			msgs = append(msgs, summary(reach)...)
		}
	}
	return invalid(v1beta1.FeatureFlagKind, ff.Name, errs, msgs)
}

// SourceValidator is the FeatureFlagSource validating webhook (see ValidateSourceSpec).
type SourceValidator struct {
	// Graph gives the operator's default provider (topology.View.DefaultSyncProvider); nil is file.
	// When it is built, an admitted source gets its blast radius as a
	// warning (blast.OfSource), and one that would deliver a flag set with
	// a provider too small for it is refused (sourceSizes).
	Graph Graph
	// Injection are the options sidecars are injected with, to tell whose
	// sidecar a change changes.
	Injection injection.Options
}

var _ admission.Handler = (*SourceValidator)(nil)

// Handle validates a create or update of a FeatureFlagSource.
func (s *SourceValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	var src, old v1beta1.FeatureFlagSource
	if resp, done := decodeForValidation(req, &src, &old); done {
		return resp
	}
	if req.Operation == admissionv1.Update && reflect.DeepEqual(src.Spec, old.Spec) &&
		src.Annotations[injection.AnnotationSidecarSecurityContext] == old.Annotations[injection.AnnotationSidecarSecurityContext] {
		return admission.Allowed("spec unchanged")
	}
	if src.Namespace == "" {
		src.Namespace = req.Namespace
	}
	def := v1beta1.SyncProviderFile
	if s.Graph != nil {
		def = s.Graph.Topology().Snapshot().DefaultSyncProvider()
	}
	errs, warnings := ValidateSourceSpec(&src, def)
	warnings = capWarnings(warnings) // the blast radius still follows
	if len(errs) == 0 && s.Graph != nil && s.Graph.GraphBuilt() {
		if r, err := blast.OfSource(s.Graph.Topology().Snapshot(), &src, s.Injection); err == nil {
			// An entry that could never deliver its flag set is refused
			// (sizes.go); else the source is admitted, with what it reaches.
			sizeErrs, sizeWarnings := sourceSizes(r)
			errs = append(errs, sizeErrs...)
			warnings = append(warnings, sizeWarnings...)
			if len(sizeErrs) == 0 {
				warnings = append(warnings, r.Summary())
			}
		}
	}
	return invalid(v1beta1.FeatureFlagSourceKind, src.Name, errs, warnings)
}

// decodeForValidation decodes the object (and, on update, the old one);
// done is true when the response is decided already.
func decodeForValidation(req admission.Request, obj, old any) (admission.Response, bool) {
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
	default:
		return admission.Allowed(string(req.Operation) + " is not judged"), true
	}
	if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the object: %w", err)), true
	}
	if req.Operation == admissionv1.Update {
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old object: %w", err)), true
		}
	}
	return admission.Response{}, false
}

// invalid denies with an Invalid status whose causes are the field errors,
// as the API server reports its own validation, or allows. Both are
// readable (readableErrors, readableWarnings): kubectl prints them whole.
func invalid(kind, name string, errs field.ErrorList, warnings []string) admission.Response {
	warnings = readableWarnings(warnings)
	if len(errs) == 0 {
		return admission.Allowed("valid").WithWarnings(warnings...)
	}
	status := apierrors.NewInvalid(v1beta1.GroupVersion.WithKind(kind).GroupKind(), workflows.Cut(name, 253), readableErrors(errs)).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false, Result: &status, Warnings: warnings,
	}}
}
