package workflows

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// GeneratedMetadata are labels and annotations put on every object
// flagplane generates (ConfigMaps, Roles, RoleBindings): the manager's
// --labels and --annotations, the OpenFeature Operator's labels and
// annotations values. They are added to what flagplane sets itself and
// never replace it: app.kubernetes.io/managed-by stays flagplane.
type GeneratedMetadata struct {
	Labels      map[string]string
	Annotations map[string]string
}

// Validate reports keys and label values the API server would refuse, and
// labels that would take over flagplane's own.
func (g GeneratedMetadata) Validate() error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(g.Labels)) {
		if k == v1beta1.LabelManagedBy {
			errs = append(errs, fmt.Errorf("--labels: %s is flagplane's: it selects the objects flagplane generates", k))
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
// operator's --labels.
func (g GeneratedMetadata) ObjectLabels() map[string]string {
	out := maps.Clone(g.Labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, ManagedLabels())
	return out
}

// ObjectAnnotations are the annotations of a generated object (the
// operator's --annotations), or nil.
func (g GeneratedMetadata) ObjectAnnotations() map[string]string {
	if len(g.Annotations) == 0 {
		return nil
	}
	return maps.Clone(g.Annotations)
}

// ManagedLabels are the labels by which flagplane knows (and its informers
// select) the objects it generates; Settings.Generated adds
// the operator's --labels.
func ManagedLabels() map[string]string {
	return map[string]string{v1beta1.LabelManagedBy: v1beta1.ManagedByValue}
}

// HasManagedLabel tells whether an object's labels say that flagplane
// generated it: the only objects it writes or deletes.
func HasManagedLabel(labels map[string]string) bool {
	return labels[v1beta1.LabelManagedBy] == v1beta1.ManagedByValue
}

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
