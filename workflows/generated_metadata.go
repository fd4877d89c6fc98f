package workflows

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// GeneratedMetadata is the metadata of every object flagplane generates
// (ConfigMaps, Roles, RoleBindings, a Flagd's objects): the value of
// app.kubernetes.io/managed-by (the manager's --managed-by), which marks
// them as flagplane's, and the labels and annotations of the manager's
// --labels and --annotations (the OpenFeature Operator's labels and
// annotations values), which are added to what flagplane sets itself and
// never replace it. A GitOps tool's keys among them (GitOpsKey) are left
// out: a generated object never looks like one the tool applied.
//
// The managed-by label is how flagplane knows its objects: its informers
// select them by it, and it writes or deletes no object of a generated
// name without it (CreateOwned, Owns). An object is flagplane's when its
// value is ManagedBy or flagplane's default, "flagplane": an install that
// moves to another value (the OpenFeature Operator's, for selectors written
// for it) adopts what it made before, and relabels it. Nothing else is
// adopted unless ManagedBy says so: with "open-feature-operator" the
// objects the OpenFeature Operator made under the names flagplane generates
// (a Flagd's Deployment, Service, Ingress, HTTPRoute, controlled by that
// Flagd) are taken over in place. An install that moves back to
// "flagplane" does not recognise the other value any more.
type GeneratedMetadata struct {
	// ManagedBy is the value of app.kubernetes.io/managed-by; empty is
	// v1beta1.ManagedByValue, "flagplane".
	ManagedBy   string
	Labels      map[string]string
	Annotations map[string]string
}

// Validate reports keys and label values the API server would refuse, and
// labels that would take over flagplane's own.
func (g GeneratedMetadata) Validate() error {
	var errs []error
	if msgs := validation.IsValidLabelValue(g.ManagedBy); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--managed-by %q is not a label value: %s", g.ManagedBy, strings.Join(msgs, "; ")))
	}
	for _, k := range slices.Sorted(maps.Keys(g.Labels)) {
		if k == v1beta1.LabelManagedBy {
			errs = append(errs, fmt.Errorf("--labels: %s is flagplane's: it selects the objects flagplane generates (its value is --managed-by)", k))
			continue
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--labels: key %q: %s", k, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(g.Labels[k]); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--labels: value %q of %s: %s", g.Labels[k], k, strings.Join(msgs, "; ")))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(g.Annotations)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--annotations: key %q: %s", k, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// ObjectLabels are the labels of a generated object: ManagedLabels and the
// operator's --labels, but for a GitOps tool's keys (GitOpsKey).
func (g GeneratedMetadata) ObjectLabels() map[string]string {
	out := DropGitOpsKeys(maps.Clone(g.Labels))
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, g.ManagedLabels())
	return out
}

// ObjectAnnotations are the annotations of a generated object (the
// operator's --annotations, but for a GitOps tool's keys), or nil.
func (g GeneratedMetadata) ObjectAnnotations() map[string]string {
	out := DropGitOpsKeys(maps.Clone(g.Annotations))
	if len(out) == 0 {
		return nil
	}
	return out
}

// ManagedByValue is the value of app.kubernetes.io/managed-by on the
// objects flagplane generates: ManagedBy, or "flagplane".
func (g GeneratedMetadata) ManagedByValue() string {
	if g.ManagedBy == "" {
		return v1beta1.ManagedByValue
	}
	return g.ManagedBy
}

// ManagedLabels are the labels flagplane marks what it generates with:
// app.kubernetes.io/managed-by and its value.
func (g GeneratedMetadata) ManagedLabels() map[string]string {
	return map[string]string{v1beta1.LabelManagedBy: g.ManagedByValue()}
}

// OwnedValues are the values of app.kubernetes.io/managed-by that make an
// object flagplane's: ManagedByValue and, when that is another one,
// flagplane's default (what the install made before it moved).
func (g GeneratedMetadata) OwnedValues() []string {
	if v := g.ManagedByValue(); v != v1beta1.ManagedByValue {
		return []string{v, v1beta1.ManagedByValue}
	}
	return []string{v1beta1.ManagedByValue}
}

// Owns tells whether an object's labels say that it is flagplane's: the
// only objects it writes or deletes. A name that flagplane generates is
// checked as well, where it writes or deletes (and the admission policy
// checks both).
func (g GeneratedMetadata) Owns(labels map[string]string) bool {
	v, ok := labels[v1beta1.LabelManagedBy]
	return ok && slices.Contains(g.OwnedValues(), v)
}

// Selector selects the objects that Owns: what the informers of generated
// objects hold.
func (g GeneratedMetadata) Selector() labels.Selector {
	req, err := labels.NewRequirement(v1beta1.LabelManagedBy, selection.In, g.OwnedValues())
	if err != nil {
		// Validate refuses what NewRequirement would: a value that is not
		// a label value is a bug of the caller.
		panic(fmt.Sprintf("selecting %s in %v: %v", v1beta1.LabelManagedBy, g.OwnedValues(), err))
	}
	return labels.NewSelector().Add(*req)
}

// ManagedLabels are the managed-by label and value of a manager started
// without --managed-by, for tests and tools that look at such a manager's
// objects. The manager itself reads them from its Settings
// (GeneratedMetadata.ManagedLabels).
func ManagedLabels() map[string]string { return GeneratedMetadata{}.ManagedLabels() }

// HasAll tells whether have holds every key of want with its value: whether
// a generated object still carries the labels or annotations it should.
func HasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
