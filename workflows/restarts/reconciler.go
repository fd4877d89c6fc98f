package restarts

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
)

// Reconciler restarts a workload, the way `kubectl rollout restart`
// does, when the injection its running pods got differs from what they
// would get now and rolloutOnChange asks for it: a source that applies now
// has it set, or one did when the pod was admitted (the pod says so).
//
// It compares with the pods themselves (AnnotationInjection), not with a
// fingerprint remembered in memory: a change made while no manager ran, or
// before this replica led, is acted on when the workload is next
// reconciled, and nothing grows with deleted workloads. Pods without the
// annotation are the healer's.
type Reconciler struct {
	Client client.Client
	// Injection are the options the admission webhook injects with.
	Injection injection.Options
	// Pods reads the workload and its pods from the cache.
	Pods WorkloadPods
	Now  func() time.Time
	// Events receives a Normal event on the workload when it is restarted.
	Events events.EventRecorder
}

// Reconcile restarts the workload when one of its current pods has another
// injection than it would get now and a rollout is asked for. The logger
// of ctx names the workload (its caller's, see workflows.LogKey).
func (r *Reconciler) Reconcile(ctx context.Context, v *topology.View, workload topology.Key) error {
	if _, ok := v.Workload(workload); !ok {
		return nil
	}
	fp, rollout := injection.Fingerprint(v, workload, r.Injection)
	obj, pods, err := r.Pods.CurrentPods(ctx, workload)
	if err != nil || obj == nil {
		return err
	}
	for _, pod := range pods {
		got, injected := pod.Annotations[AnnotationInjection]
		if !injected || got == fp || !(rollout || pod.Annotations[AnnotationRolloutOnChange] == "true") {
			continue
		}
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		if err := Restart(ctx, r.Client, obj, now()); err != nil {
			return err
		}
		log.FromContext(ctx).Info("restarted workload: its flagd injection changed", "Pod", klog.KRef(pod.Namespace, pod.Name))
		workflows.Normal(r.Events, obj, workflows.EventRestarted, workflows.ActionRollout,
			"restarted by flagplane: the flagd configuration of its pods changed (rolloutOnChange); pod %s has another than it would get now", pod.Name)
		return nil
	}
	return nil
}
