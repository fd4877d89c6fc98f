package webhooks

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/staging"
)

// RolloutPolicyValidatorPath is where RolloutPolicyValidator is served.
const RolloutPolicyValidatorPath = "/validate-delivery-flagplane-dev-v1alpha1-featureflagrolloutpolicy"

// RolloutPolicyValidator refuses a FeatureFlagRolloutPolicy that could not
// stage anything as written, with what the API server's schema cannot say:
//
//   - a step's label selector that does not parse (an unknown operator,
//     In or NotIn without values, Exists with values, a bad label);
//   - a gate this version of flagplane does not evaluate;
//   - a Prometheus gate's query that Prometheus' parser refuses (the
//     manager confines every query to the consumers' namespaces, which
//     takes a query it can parse: staging.ConfineQuery);
//   - a namespaceSelector or workloadSelector step that selects none of
//     the flag set's consumers as the graph knows them now (when the flag
//     set exists and has consumers): a typo in a label would otherwise
//     pass every edit straight to the last step.
//
// It warns, and admits, when the flag set does not exist or has no
// consumer yet (nothing to check the selectors against), and when some
// consumers read the FeatureFlag themselves (provider kubernetes), which
// no rollout stages. The schema refuses the rest (an
// unknown gate type, a percentage outside 0–100, a step with no or two
// selectors).
type RolloutPolicyValidator struct {
	// Graph is the operator's graph; nil checks no selector against it.
	Graph Graph
	// PrometheusGates says that the manager evaluates Prometheus gates
	// (--prometheus-gates); without it a policy naming one is refused.
	PrometheusGates bool
}

var _ admission.Handler = (*RolloutPolicyValidator)(nil)

// Handle validates a create or update of a FeatureFlagRolloutPolicy.
func (r *RolloutPolicyValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	var p, old deliveryv1alpha1.FeatureFlagRolloutPolicy
	if resp, done := decodeForValidation(req, &p, &old); done {
		return resp
	}
	if req.Operation == admissionv1.Update && reflect.DeepEqual(p.Spec, old.Spec) {
		return admission.Allowed("spec unchanged")
	}
	if p.Namespace == "" {
		p.Namespace = req.Namespace
	}
	var v *topology.View
	if r.Graph != nil && r.Graph.GraphBuilt() {
		v = r.Graph.Topology().Snapshot()
	}
	errs, warnings := ValidateRolloutPolicy(v, &p, r.PrometheusGates)
	return refusal(p.Name, errs, warnings)
}

// ValidateRolloutPolicy is RolloutPolicyValidator's judgement, against v
// (nil: no graph to check the selectors against).
func ValidateRolloutPolicy(v *topology.View, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, prometheus bool) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	steps := field.NewPath("spec", "steps")
	for i, s := range p.Spec.Steps {
		for _, sel := range []struct {
			name string
			sel  *metav1.LabelSelector
		}{{"namespaceSelector", s.NamespaceSelector}, {"workloadSelector", s.WorkloadSelector}} {
			if sel.sel == nil {
				continue
			}
			// The API server's own validation of a selector names each
			// label, operator and value that is wrong, and why. The
			// selector is never the value of an error: it is the user's,
			// of any size, and printing it made refusals of megabytes.
			path := steps.Index(i).Child(sel.name)
			if selErrs := metav1validation.ValidateLabelSelector(sel.sel, metav1validation.LabelSelectorValidationOptions{}, path); len(selErrs) > 0 {
				errs = append(errs, selErrs...)
			} else if _, err := metav1.LabelSelectorAsSelector(sel.sel); err != nil {
				errs = append(errs, field.Invalid(path, field.OmitValueType{}, err.Error()))
			}
		}
	}
	if why := staging.Unsupported(p.Spec.Gates, prometheus); why != "" {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "gates"), why, supportedGates))
	}
	for i, g := range p.Spec.Gates {
		if g.Prometheus == nil {
			continue
		}
		if why := staging.ValidateQuery(g.Prometheus.Query); why != "" {
			errs = append(errs, field.Invalid(field.NewPath("spec", "gates").Index(i).Child("prometheus", "query"), g.Prometheus.Query, why))
		}
	}
	if len(errs) > 0 || v == nil {
		return errs, warnings
	}
	f := topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name)
	if _, ok := v.FlagSet(f); !ok {
		return errs, append(warnings, fmt.Sprintf("FeatureFlag %s/%s does not exist (yet): the policy stages nothing until it does, and its selectors were not checked", f.Namespace, f.Name))
	}
	plan := v.PlanFor(p)
	if len(plan.Unstaged) > 0 {
		warnings = append(warnings, fmt.Sprintf("%d workload(s) or Flagd(s) read FeatureFlag %s themselves (provider kubernetes): no rollout stages them, "+
			"they get every edit at once, and the other consumers follow the plan (status.unstaged lists them)", len(plan.Unstaged), f.Name))
	}
	if len(plan.Consumers) == 0 {
		return errs, append(warnings, fmt.Sprintf("FeatureFlag %s has no consumer yet: the steps' selectors were not checked against any", f.Name))
	}
	var consumers []string
	for _, c := range plan.Consumers {
		consumers = append(consumers, c.Namespace)
	}
	for i, s := range p.Spec.Steps {
		if s.NamespaceSelector == nil && s.WorkloadSelector == nil {
			continue
		}
		if len(v.StepSelects(p, i)) > 0 {
			continue
		}
		what, path := "namespaces", steps.Index(i).Child("namespaceSelector")
		sel := s.NamespaceSelector
		if s.WorkloadSelector != nil {
			what, path, sel = "workloads", steps.Index(i).Child("workloadSelector"), s.WorkloadSelector
		}
		errs = append(errs, field.Invalid(path, metav1.FormatLabelSelector(sel),
			fmt.Sprintf("selects none of the %s of FeatureFlag %s's consumers (namespaces %s): check its labels",
				what, f.Name, namespaceList(consumers, 10))))
	}
	return errs, warnings
}

// namespaceList joins at most max namespaces, saying how many more there are.
func namespaceList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

var supportedGates = []string{string(deliveryv1alpha1.GatePodsReady), string(deliveryv1alpha1.GateRestarts), string(deliveryv1alpha1.GateEvaluationErrors), string(deliveryv1alpha1.GatePrometheus) + " (with --prometheus-gates)"}

// refusal denies with an Invalid status whose causes are the field errors,
// or allows, with readable warnings either way.
func refusal(name string, errs field.ErrorList, warnings []string) admission.Response {
	warnings = readableWarnings(warnings)
	if len(errs) == 0 {
		return admission.Allowed("valid").WithWarnings(warnings...)
	}
	gk := deliveryv1alpha1.GroupVersion.WithKind(deliveryv1alpha1.FeatureFlagRolloutPolicyKind).GroupKind()
	status := apierrors.NewInvalid(gk, workflows.Cut(name, 253), readableErrors(errs)).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}}
}
