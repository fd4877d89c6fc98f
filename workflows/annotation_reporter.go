package workflows

import (
	"context"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
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
	target := WorkloadEventTarget(ctx, r.Client, w)
	for _, msg := range slices.Compact(warnings) {
		Warn(r.Events, target, EventUnresolvedAnnotation, ActionResolve, "%s", msg)
	}
}
