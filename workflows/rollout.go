package workflows

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/topology"
)

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout
// restart` sets; setting it the same way rolls a workload's pods.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// InjectionFingerprint hashes the injection a pod of the workload would get
// now — DesiredInjection rendered with the process-wide options (see
// SetInjectionOptions) — and tells whether any of its sources asks for a
// rollout on change. Equal fingerprints mean the webhook would inject the
// same thing; "" means it would inject nothing. A flag edit changes only the
// content of a mounted ConfigMap, never the fingerprint.
func InjectionFingerprint(v *topology.View, workload topology.Key) (string, bool) {
	rollout := false
	for _, sk := range v.SourcesOfWorkload(workload) {
		if src, ok := v.Source(sk); ok && src.Spec.RolloutOnChange != nil && *src.Spec.RolloutOnChange {
			rollout = true
		}
	}
	return DesiredInjection(v, workload, CurrentInjectionOptions()).Fingerprint(), rollout
}

// RolloutReconciler restarts a workload, the way `kubectl rollout restart`
// does, when what would be injected into its pods changes and one of its
// sources (before or after the change) has rolloutOnChange set.
//
// The first fingerprint seen of a workload is its baseline: a workload that
// was just created, or seen at startup, is not restarted.
type RolloutReconciler struct {
	Client client.Client
	Now    func() time.Time
	// Events receives a Normal event on the workload when it is restarted.
	Events events.EventRecorder

	mu   sync.Mutex
	seen map[topology.Key]rolloutState
}

type rolloutState struct {
	fingerprint string
	rollout     bool
}

// Observe records the baseline of a workload without acting on it.
func (r *RolloutReconciler) Observe(v *topology.View, workload topology.Key) {
	fp, rollout := InjectionFingerprint(v, workload)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[topology.Key]rolloutState{}
	}
	if _, ok := r.seen[workload]; !ok {
		r.seen[workload] = rolloutState{fingerprint: fp, rollout: rollout}
	}
}

// Reconcile restarts the workload when its fingerprint changed and a rollout was asked for.
func (r *RolloutReconciler) Reconcile(ctx context.Context, v *topology.View, workload topology.Key) error {
	if _, ok := v.Workload(workload); !ok {
		r.mu.Lock()
		delete(r.seen, workload)
		r.mu.Unlock()
		return nil
	}
	fp, rollout := InjectionFingerprint(v, workload)
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[topology.Key]rolloutState{}
	}
	prev, known := r.seen[workload]
	r.mu.Unlock()
	if known && prev.fingerprint == fp {
		return nil
	}
	if known && (rollout || prev.rollout) {
		if err := r.restart(ctx, workload); err != nil {
			return err
		}
		log.FromContext(ctx).Info("restarted workload: its flagd injection changed", "workload", workload.String())
		recorder{r.Events}.normal(workloadEventTarget(ctx, r.Client, workload), EventRestarted, actionRollout,
			"restarted by flagplane: the flagd configuration of its pods changed (rolloutOnChange)")
	}
	r.mu.Lock()
	r.seen[workload] = rolloutState{fingerprint: fp, rollout: rollout}
	r.mu.Unlock()
	return nil
}

func (r *RolloutReconciler) restart(ctx context.Context, workload topology.Key) error {
	obj, err := newWorkloadObject(workload)
	if err != nil {
		return err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		RestartedAtAnnotation, now().UTC().Format(time.RFC3339))
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("restarting %s: %w", workload, err))
	}
	return nil
}

// newWorkloadObject returns an empty object of a workload's kind, named.
func newWorkloadObject(k topology.Key) (client.Object, error) {
	var obj client.Object
	switch k.Kind {
	case topology.KindDeployment:
		obj = &appsv1.Deployment{}
	case topology.KindStatefulSet:
		obj = &appsv1.StatefulSet{}
	case topology.KindDaemonSet:
		obj = &appsv1.DaemonSet{}
	default:
		return nil, fmt.Errorf("%s is not a workload", k)
	}
	obj.SetNamespace(k.Namespace)
	obj.SetName(k.Name)
	return obj, nil
}

// workloadEventTarget is the workload as an event target: the cached object
// (whose UID lets kubectl describe find the event), else a bare reference.
func workloadEventTarget(ctx context.Context, c client.Reader, k topology.Key) runtime.Object {
	if obj, err := newWorkloadObject(k); err == nil && c.Get(ctx, client.ObjectKeyFromObject(obj), obj) == nil {
		return obj
	}
	return &corev1.ObjectReference{APIVersion: "apps/v1", Kind: string(k.Kind), Namespace: k.Namespace, Name: k.Name}
}
