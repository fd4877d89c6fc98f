package staging

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/status"
)

// Graph is what the reconciler reads of the topology.
type Graph interface {
	Snapshot() *topology.View
}

// Owners resolves a pod to its workload.
type Owners interface {
	WorkloadOf(ctx context.Context, namespace string, pod *corev1.Pod) (topology.Key, bool)
}

// Reconciler moves a FeatureFlagRolloutPolicy one step of its state
// machine (Next) and writes its status. It reads everything from the
// manager's cache and the graph; the gates' outside answers come from its
// Prober, which reads them in the background. So a reconcile never waits
// on a tenant's pod or query: what it does before its status write is
// bounded by the cache and the graph, and its write cannot be lost to its
// own deadline.
type Reconciler struct {
	// Reader is the manager's cache: policies, pods, ConfigMaps.
	Reader client.Reader
	// Writer writes the policy's status.
	Writer client.Client
	Graph  Graph
	// Observed gives what the copies of flag sets hold (status.CopiesOf).
	Observed func(ctx context.Context) status.Observed
	Owners   Owners
	// Events receives the policy's Events; nil sends none.
	Events events.EventRecorder
	// Prober reads the gates' outside answers.
	Prober *Prober
	// PrometheusGates evaluates Prometheus gates (--prometheus-gates).
	PrometheusGates bool
	// NamespaceLabel is the label of a series' namespace that Prometheus
	// queries are confined by (DefaultNamespaceLabel when empty).
	NamespaceLabel string
	// PodAddress, when set, is where a container's port of a pod is
	// reached (tests whose pods have no routable IP); nil: the pod's IP.
	PodAddress func(pod *corev1.Pod, container string, port int32) (string, bool)
	// Pacing paces the status writes that report progress only.
	Pacing Pacing
	// CacheBehind is how long to wait for the graph to take the policy's
	// last status write (default 50ms).
	CacheBehind time.Duration
}

// Reconcile reconciles the FeatureFlagRolloutPolicy of key. The logger of
// ctx names the policy (its caller's, see workflows.LogKey); its line
// names the FeatureFlag it rolls out too.
func (r *Reconciler) Reconcile(ctx context.Context, key topology.Key) error {
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
			return nil
		}
		return fmt.Errorf("reading FeatureFlagRolloutPolicy %s: %w", key, err)
	}
	v := r.Graph.Snapshot()
	f := topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name)
	plan := v.RolloutPlan(f)
	if plan != nil && plan.Problem == "" && plan.Policy == key && !plan.NewPlan && plan.Stable != p.Status.StableRevision &&
		!topology.SameRevision(plan.Stable, p.Status.StableRevision) {
		// The graph has not taken the policy's latest status yet.
		return workflows.RequeueAfter(r.cacheBehind())
	}
	obs := Observation{Now: time.Now(), PrometheusGates: r.PrometheusGates}
	var recheck, poll time.Duration
	if plan != nil && plan.Problem == "" {
		obs.Serving, obs.Unread = r.serving(ctx, v, f, plan)
		if !plan.NewPlan {
			obs.GateFailure, obs.GateUnknown, recheck, poll = r.gates(ctx, p, plan, obs.Serving)
		}
	}
	res := Next(p, plan, obs)
	running := res.Status.Phase == deliveryv1alpha1.PhaseProgressing || res.Status.Phase == deliveryv1alpha1.PhasePaused
	if !running {
		r.Prober.Forget(key)
	}
	for _, d := range []time.Duration{recheck, poll} {
		if running && d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d
		}
	}
	if !equality.Semantic.DeepEqual(res.Status, p.Status) {
		if wait := r.Pacing.progressWait(key, p.Status, res.Status, obs.Now); wait > 0 {
			// Only the consumers' progress changed, and the last write was
			// moments ago: a wave of ConfigMap writes would otherwise write
			// the policy's status once per ConfigMap.
			return workflows.RequeueAfter(wait)
		}
		next := p.DeepCopy()
		next.Status = res.Status
		if err := r.Writer.Status().Update(ctx, next); err != nil {
			if apierrors.IsConflict(err) {
				return workflows.RequeueAfter(r.cacheBehind())
			}
			return fmt.Errorf("writing the status of FeatureFlagRolloutPolicy %s: %w", key, err)
		}
		r.Pacing.wrote(key, obs.Now)
		for _, e := range res.Events {
			if e.Warning {
				workflows.Warn(r.Events, next, e.Reason, workflows.ActionRollout, "%s", e.Note)
			} else {
				workflows.Normal(r.Events, next, e.Reason, workflows.ActionRollout, "%s", e.Note)
			}
		}
		log.FromContext(ctx).Info("rollout", "FeatureFlag", klog.KRef(f.Namespace, f.Name),
			"phase", res.Status.Phase, "step", res.Status.Step, "rollout", res.Status.Rollout, "target", topology.ShortRevision(res.Status.TargetRevision), "message", res.Status.Message)
	}
	if res.RequeueAfter > 0 {
		return workflows.RequeueAfter(res.RequeueAfter)
	}
	return nil
}

// forget drops what the reconciler keeps of a deleted policy.
func (r *Reconciler) forget(key topology.Key) {
	r.Prober.Forget(key)
	r.Pacing.forget(key)
}

func (r *Reconciler) cacheBehind() time.Duration {
	if r.CacheBehind > 0 {
		return r.CacheBehind
	}
	return 50 * time.Millisecond
}

// serving is, per consumer namespace of a plan, the revision every copy
// of the flag set there holds (status.Copies.Held), when the flagd of every
// pod there that flagplane asks answers with it (status.ConfirmObserved);
// "" otherwise. So a step's pause and gates start once its consumers'
// pods serve the revision, not once it was written. unread holds the
// namespaces of "" whose copies hold the revision and whose pods not
// confirmed were not read yet.
func (r *Reconciler) serving(ctx context.Context, v *topology.View, f topology.Key, plan *topology.RolloutPlan) (serving map[string]string, unread map[string]bool) {
	obs := r.Observed(ctx)
	consumers := v.ConsumersOf(f)
	copies := status.CopiesOf(consumers, obs)
	co, confirms := obs.(status.ConfirmObserved)
	confirmable := map[string][]topology.Key{}
	if confirms {
		for _, c := range consumers.Readers {
			confirmable[c.Namespace] = c.Workloads
		}
	}
	serving, unread = make(map[string]string, len(plan.Consumers)), map[string]bool{}
	for _, c := range plan.Consumers {
		held := copies.In(c.Namespace).Held()
		if readers := confirmable[c.Namespace]; held != "" && len(readers) > 0 {
			if s := co.Confirm(f, c.Namespace, readers, held, r.flags(v, f, held), true); s.Confirmed < s.Pods {
				unread[c.Namespace] = s.Confirmed+s.Unread == s.Pods
				held = ""
			}
		}
		serving[c.Namespace] = held
	}
	return serving, unread
}

// flags is how many flags revision of f has.
func (r *Reconciler) flags(v *topology.View, f topology.Key, revision string) int {
	return status.RenderedFlags(v, f, revision)
}

// gates evaluates the policy's gates on the consumers that serve the new
// revision: their pods, from the cache, for PodsReady and Restarts; what
// the Prober last read of their flagd's metrics and of the Prometheus
// queries over their namespaces. It says which gate fails ("" when all
// hold), which could not be evaluated, when a PodsReady grace ends
// (recheck), and when to look again for the Prober's next sweep (poll: 0
// while one runs, whose end enqueues the policy).
func (r *Reconciler) gates(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, serving map[string]string) (failure, unknown string, recheck, poll time.Duration) {
	if len(p.Spec.Gates) == 0 || plan.Target == plan.Stable {
		return "", "", 0, 0
	}
	if p.Status.Phase != deliveryv1alpha1.PhaseProgressing && p.Status.Phase != deliveryv1alpha1.PhasePaused {
		return "", "", 0, 0
	}
	key := topology.RolloutPolicyKey(p.Namespace, p.Name)
	var namespaces []string
	for _, c := range plan.Consumers {
		if c.Revision == plan.Target && serving[c.Namespace] == plan.Target {
			namespaces = append(namespaces, c.Namespace)
		}
	}
	metrics := false
	var req ProbeRequest
	for i, g := range p.Spec.Gates {
		switch {
		case g.Type == deliveryv1alpha1.GateEvaluationErrors:
			metrics = true
		case g.Type == deliveryv1alpha1.GatePrometheus && r.PrometheusGates && g.Prometheus != nil && len(namespaces) > 0:
			// No consumer serves the new revision (a step of 0 %): nothing
			// to judge.
			q, err := ConfineQuery(g.Prometheus.Query, r.NamespaceLabel, namespaces)
			if err != nil {
				unknown = fmt.Sprintf("gate Prometheus (spec.gates[%d]) cannot be run: %s", i, err)
				continue
			}
			req.Queries = append(req.Queries, ProbeQuery{Gate: i, Address: g.Prometheus.Address, Query: q})
		}
	}
	pods := r.targetPods(ctx, plan, serving)
	if metrics {
		for _, sp := range pods {
			if sp.Address != "" {
				req.Pods = append(req.Pods, ProbePod{UID: sp.UID, Address: sp.Address})
			}
		}
	}
	rollout := p.Status.TargetRevision + "/" + strconv.FormatInt(p.Status.Rollout, 10)
	readings := r.Prober.Read(key, rollout, req)
	poll = readings.Due
	for _, q := range req.Queries {
		got, ok := readings.Queries[q]
		switch {
		case !ok:
			unknown = fmt.Sprintf("gate Prometheus (spec.gates[%d]) has not been read yet", q.Gate)
		case got.Err != "":
			unknown = fmt.Sprintf("gate Prometheus (spec.gates[%d]) cannot be read: %s", q.Gate, got.Err)
		default:
			if f := PrometheusFailure(q.Gate, p.Spec.Gates[q.Gate], got.Value); f != "" {
				return f, "", 0, 0
			}
		}
	}
	gatePods := make([]Pod, 0, len(pods))
	for _, sp := range pods {
		if got, ok := readings.Pods[sp.UID]; ok {
			sp.EvaluationErrors, sp.MetricsError = got.Errors, got.Err
		}
		gatePods = append(gatePods, sp.Pod)
	}
	var since time.Time
	if p.Status.StepStartedAt != nil {
		since = p.Status.StepStartedAt.Time
	}
	now := time.Now()
	return GateFailure(p.Spec.Gates, gatePods, now, since), unknown, NextCheck(p.Spec.Gates, gatePods, now), poll
}

// targetPod is a pod of a consumer that serves the new revision, and where
// its flagd's metrics are ("" when they are not read).
type targetPod struct {
	Pod
	Address string
}

// targetPods lists the pods of the workloads of the consumers that serve
// the plan's target, from the cache.
func (r *Reconciler) targetPods(ctx context.Context, plan *topology.RolloutPlan, serving map[string]string) []targetPod {
	var out []targetPod
	for _, c := range plan.Consumers {
		if c.Revision != plan.Target || serving[c.Namespace] != plan.Target || len(c.Workloads) == 0 {
			continue
		}
		list := &corev1.PodList{}
		// The pods are read, never changed: the cache's own objects, not
		// copies (a policy over 10,000 pods copied them all each time).
		if err := r.Reader.List(ctx, list, client.InNamespace(c.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if pod.DeletionTimestamp != nil {
				continue
			}
			w, ok := r.Owners.WorkloadOf(ctx, pod.Namespace, pod)
			if !ok || !slices.Contains(c.Workloads, w) {
				continue
			}
			sp := targetPod{Pod: PodOf(pod, w)}
			if sp.ManagementPort != 0 {
				sp.Address = r.address(pod, sp.Pod)
			}
			out = append(out, sp)
		}
	}
	return out
}

// address is where a pod's flagd management port is reached.
func (r *Reconciler) address(pod *corev1.Pod, sp Pod) string {
	if r.PodAddress != nil {
		a, _ := r.PodAddress(pod, injection.SidecarName, sp.ManagementPort)
		return a
	}
	if sp.IP == "" {
		return ""
	}
	return PodAddress(sp.IP, sp.ManagementPort)
}
