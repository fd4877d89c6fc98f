package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// AnnotationReporter tells the owner of a workload, with a Warning Event on
// it, which sources and in-process configurations its pod-template
// annotations name in vain (AnnotationWarnings): missing, or in another
// namespace without a ReferenceGrant. It reports a workload's warnings when
// they change, not on every reconcile.
type AnnotationReporter struct {
	// Client reads the workload from the cache, to attach the Event to it.
	Client client.Reader
	Events events.EventRecorder

	mu       sync.Mutex
	reported map[topology.Key]string
}

// Report sends the workload's warnings if they differ from the last ones sent.
func (r *AnnotationReporter) Report(ctx context.Context, v *topology.View, w topology.Key) {
	warnings := AnnotationWarnings(v, w)
	text := strings.Join(warnings, "\n")
	r.mu.Lock()
	if r.reported == nil {
		r.reported = map[topology.Key]string{}
	}
	same := r.reported[w] == text
	if text == "" {
		delete(r.reported, w)
	} else {
		r.reported[w] = text
	}
	r.mu.Unlock()
	if same || len(warnings) == 0 {
		return
	}
	target := workflows.WorkloadEventTarget(ctx, r.Client, w)
	for _, msg := range slices.Compact(warnings) {
		workflows.Warn(r.Events, target, workflows.EventUnresolvedAnnotation, workflows.ActionResolve, "%s", msg)
	}
}

// AnnotationWarnings says, for a workload, each source or in-process
// configuration its pod-template annotation names that does not resolve,
// and why. Across namespaces the message is the same whether or not the
// object exists, so that it tells nothing about another namespace.
func AnnotationWarnings(v *topology.View, w topology.Key) []string {
	var out []string
	for _, r := range v.AnnotationRefs(w) {
		annotation := v1beta1.AnnotationFeatureFlagSource
		if r.Target.Kind == topology.KindInProcessConfig {
			annotation = v1beta1.AnnotationInProcessConfiguration
		}
		switch r.State {
		case topology.RefNotPermitted:
			out = append(out, fmt.Sprintf("%s names %s %s/%s, which is in another namespace, and no ReferenceGrant in namespace %s permits the pods of namespace %s to use it: it is not applied",
				annotation, r.Target.Kind, r.Target.Namespace, r.Target.Name, r.Target.Namespace, w.Namespace))
		case topology.RefNotFound:
			out = append(out, fmt.Sprintf("%s names %s %s/%s, which does not exist: it is applied once it does",
				annotation, r.Target.Kind, r.Target.Namespace, r.Target.Name))
		}
	}
	return out
}
