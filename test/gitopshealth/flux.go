package gitopshealth

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// kstatus's statuses, which Flux gives objects it checks.
const (
	Current    = "Current"
	InProgress = "InProgress"
	Failed     = "Failed"
	// FluxUnknown is the status of an object whose expressions do not
	// evaluate: Flux waits on it as on an InProgress one, until its timeout.
	FluxUnknown = "Unknown"
)

// FluxHealthCheck is an entry of a Kustomization's spec.healthCheckExprs.
type FluxHealthCheck struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// fluxEvaluator is a FluxHealthCheck's expressions, parsed, in the order
// Flux evaluates them.
type fluxEvaluator []struct {
	status string
	prog   cel.Program
}

var fluxOnce = sync.OnceValues(loadFluxHealthChecks)

// Flux returns the status Flux's kustomize-controller gives obj with
// flagplane's healthCheckExprs: InProgress when status.observedGeneration
// is an integer other than metadata.generation; else the status of the
// first of inProgress, failed and current that is true; else InProgress.
// An expression that does not evaluate (for instance on an object without
// status, since an absent top-level field is an error in Flux's CEL) gives
// Unknown and the error, as Flux's status reader does.
func Flux(obj *unstructured.Unstructured) (status string, err error) {
	evaluators, err := fluxOnce()
	if err != nil {
		return "", err
	}
	gk := obj.GroupVersionKind().GroupKind()
	e, ok := evaluators[gk]
	if !ok {
		e, ok = evaluators[schema.GroupKind{Group: gk.Group}]
	}
	if !ok {
		return "", fmt.Errorf("%s has no Flux health check expressions in %s", gk, FluxHealthCheckExprs)
	}
	return e.evaluate(obj)
}

func (e fluxEvaluator) evaluate(obj *unstructured.Unstructured) (string, error) {
	content := obj.UnstructuredContent()
	if observed, ok, err := unstructured.NestedInt64(content, "status", "observedGeneration"); err == nil && ok {
		if gen, ok, err := unstructured.NestedInt64(content, "metadata", "generation"); err == nil && ok && gen != observed {
			return InProgress, nil
		}
	}
	for _, x := range e {
		val, _, err := x.prog.ContextEval(context.Background(), content)
		if err != nil {
			return FluxUnknown, fmt.Errorf("%s expression of %s: %w", x.status, obj.GroupVersionKind().GroupKind(), err)
		}
		b, ok := val.(types.Bool)
		if !ok {
			return FluxUnknown, fmt.Errorf("%s expression of %s is not a boolean: %v", x.status, obj.GroupVersionKind().GroupKind(), val)
		}
		if b {
			return x.status, nil
		}
	}
	return InProgress, nil
}

// loadFluxHealthChecks reads FluxHealthCheckExprs and parses its
// expressions as Flux does, which rejects a duplicate group and kind and an
// entry without current.
func loadFluxHealthChecks() (map[schema.GroupKind]fluxEvaluator, error) {
	path, err := fromRoot(FluxHealthCheckExprs)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var checks []FluxHealthCheck
	if err := yaml.UnmarshalStrict(b, &checks); err != nil {
		return nil, fmt.Errorf("%s: %w", FluxHealthCheckExprs, err)
	}
	out := make(map[schema.GroupKind]fluxEvaluator, len(checks))
	for i, c := range checks {
		gk := schema.FromAPIVersionAndKind(c.APIVersion, c.Kind).GroupKind()
		if _, dup := out[gk]; dup {
			return nil, fmt.Errorf("%s: entry %d: a second entry for %s", FluxHealthCheckExprs, i, gk)
		}
		if c.Current == "" {
			return nil, fmt.Errorf("%s: entry %d (%s): current is required", FluxHealthCheckExprs, i, gk)
		}
		var e fluxEvaluator
		for _, x := range []struct{ status, expr string }{
			{InProgress, c.InProgress}, {Failed, c.Failed}, {Current, c.Current},
		} {
			if x.expr == "" {
				continue
			}
			prog, err := fluxProgram(x.expr)
			if err != nil {
				return nil, fmt.Errorf("%s: entry %d (%s): %s: %w", FluxHealthCheckExprs, i, gk, x.status, err)
			}
			e = append(e, struct {
				status string
				prog   cel.Program
			}{x.status, prog})
		}
		out[gk] = e
	}
	return out, nil
}

// fluxProgram parses a health check expression in Flux's CEL environment:
// parsed, not type-checked (no variable is declared: the object's
// top-level fields are the variables, resolved when evaluated), with the
// same environment and program options.
func fluxProgram(expr string) (cel.Program, error) {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		return nil, err
	}
	ast, issues := env.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return nil, issues.Err()
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
}
