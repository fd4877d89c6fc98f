package migrate

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrManagerRunning is Apply's error while the OpenFeature Operator's
// manager is installed: it removes nothing then.
var ErrManagerRunning = errors.New("the OpenFeature Operator's manager is still installed: uninstall it first")

// Removed is what Apply did with one finding.
type Removed struct {
	Object Object
	// Gone: it was deleted already (by someone else, or its namespace).
	Gone bool
}

// Apply deletes the findings of r marked Remove, in their order (admission
// first), each only if it is still the object Scan saw (same UID). It
// stops at the first error; what it removed until then is returned.
func Apply(ctx context.Context, c client.Client, r *Report) ([]Removed, error) {
	if r.ManagerRunning {
		return nil, ErrManagerRunning
	}
	var out []Removed
	for _, f := range r.ToRemove() {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(f.Object.APIVersion)
		o.SetKind(f.Object.Kind)
		o.SetNamespace(f.Object.Namespace)
		o.SetName(f.Object.Name)
		opts := []client.DeleteOption{client.PropagationPolicy("Background")}
		if f.Object.UID != "" {
			opts = append(opts, client.Preconditions{UID: &f.Object.UID})
		}
		err := c.Delete(ctx, o, opts...)
		switch {
		case err == nil:
			out = append(out, Removed{Object: f.Object})
		case apierrors.IsNotFound(err):
			out = append(out, Removed{Object: f.Object, Gone: true})
		default:
			return out, fmt.Errorf("deleting %s: %w", f.Object, err)
		}
	}
	return out, nil
}
