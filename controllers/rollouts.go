package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/staging"
)

// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrolloutpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrolloutpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=delivery.flagplane.dev,resources=featureflagrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// The staged rollouts (issue 30): FeatureFlagRolloutPolicies, the
// FeatureFlagRevisions whose content a plan serves, and the labels of
// Namespaces enter the graph, which plans who serves what
// (topology.View.RolloutPlan); the rollouts queue moves each policy through
// its steps (staging.Next) and writes its status, which the plan reads.

// rolloutKinds are the graph kinds of staged rollouts.
func (c *Controller) rolloutKinds() []registrar {
	kinds := []registrar{
		graphKind[*deliveryv1alpha1.FeatureFlagRolloutPolicy]{
			object: &deliveryv1alpha1.FeatureFlagRolloutPolicy{}, name: deliveryv1alpha1.FeatureFlagRolloutPolicyKind, queue: c.rollouts,
			change: func(old, new *deliveryv1alpha1.FeatureFlagRolloutPolicy) string {
				if topology.RolloutPolicyChanged(old, new) || !maps.Equal(old.Annotations, new.Annotations) {
					return "changed"
				}
				return ""
			},
			upsert: (*topology.Topology).UpsertRolloutPolicy,
			remove: byName[*deliveryv1alpha1.FeatureFlagRolloutPolicy]((*topology.Topology).DeleteRolloutPolicy),
			// A promotion or an abort changes no plan: the policy is looked at again.
			edited: func(p *deliveryv1alpha1.FeatureFlagRolloutPolicy) {
				c.rollouts.Add(topology.RolloutPolicyKey(p.Namespace, p.Name))
			},
		},
		graphKind[*deliveryv1alpha1.FeatureFlagRevision]{
			object: &deliveryv1alpha1.FeatureFlagRevision{}, name: deliveryv1alpha1.FeatureFlagRevisionKind,
			change: func(_, _ *deliveryv1alpha1.FeatureFlagRevision) string { return "" }, // immutable
			upsert: func(t *topology.Topology, r *deliveryv1alpha1.FeatureFlagRevision) (topology.Delta, error) {
				return t.UpsertRevision(r), nil
			},
			remove: func(t *topology.Topology, r *deliveryv1alpha1.FeatureFlagRevision) topology.Delta {
				return t.DeleteRevision(r.Namespace, r.Name, r.Spec.FlagSet, r.Spec.Revision)
			},
		},
	}
	if len(c.opts.Namespaces) == 0 {
		// A namespaced install cannot read Namespaces: its namespace
		// selectors match no namespace (docs/delivery.md).
		kinds = append(kinds, graphKind[*corev1.Namespace]{
			object: &corev1.Namespace{}, name: "Namespace",
			change: func(old, new *corev1.Namespace) string {
				if maps.Equal(old.Labels, new.Labels) {
					return ""
				}
				return "labels-changed"
			},
			upsert: func(t *topology.Topology, ns *corev1.Namespace) (topology.Delta, error) {
				return t.UpsertNamespace(ns.Name, ns.Labels), nil
			},
			remove: func(t *topology.Topology, ns *corev1.Namespace) topology.Delta { return t.DeleteNamespace(ns.Name) },
		})
	}
	return kinds
}

// reconcileRollout moves a rollout policy one step of its state machine
// and writes its status.
func (c *Controller) reconcileRollout(ctx context.Context, key topology.Key) error {
	if key.Kind != topology.KindRolloutPolicy {
		return errNotThisQueue
	}
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
	if err := c.cache.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	v := c.topo.Snapshot()
	f := topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name)
	plan := v.RolloutPlan(f)
	if plan != nil && plan.Problem == "" && plan.Policy == key && plan.Stable != p.Status.StableRevision && !plan.NewPlan {
		// The graph has not taken the policy's latest status yet.
		return workflows.RequeueAfter(cacheBehindDelay)
	}
	obs := staging.Observation{Now: time.Now(), PrometheusGates: c.opts.PrometheusGates}
	var recheck time.Duration
	if plan != nil && plan.Problem == "" {
		obs.Serving = c.serving(ctx, v, f, plan)
		if !plan.NewPlan {
			obs.GateFailure, obs.GateUnknown, recheck = c.gateFailure(ctx, p, plan)
		}
	}
	res := staging.Next(p, plan, obs)
	if recheck > 0 && (res.RequeueAfter == 0 || recheck < res.RequeueAfter) {
		// A pod's PodsReady grace ends then: no event will say so.
		res.RequeueAfter = recheck + 100*time.Millisecond
	}
	if running := res.Status.Phase == deliveryv1alpha1.PhaseProgressing || res.Status.Phase == deliveryv1alpha1.PhasePaused; running && res.RequeueAfter == 0 {
		for _, g := range p.Spec.Gates {
			if g.Type == deliveryv1alpha1.GateEvaluationErrors || g.Type == deliveryv1alpha1.GatePrometheus {
				res.RequeueAfter = metricsPoll
			}
		}
	}
	if !equality.Semantic.DeepEqual(res.Status, p.Status) {
		if wait := c.rolloutWrites.progressWait(key, p.Status, res.Status, obs.Now); wait > 0 {
			// Only the consumers' progress changed, and the last write was
			// moments ago: a wave of ConfigMap writes would otherwise write
			// the policy's status once per ConfigMap.
			return workflows.RequeueAfter(wait)
		}
		next := p.DeepCopy()
		next.Status = res.Status
		if err := c.client.Status().Update(ctx, next); err != nil {
			if apierrors.IsConflict(err) {
				return workflows.RequeueAfter(cacheBehindDelay)
			}
			return fmt.Errorf("writing the status of FeatureFlagRolloutPolicy %s/%s: %w", p.Namespace, p.Name, err)
		}
		c.rolloutWrites.wrote(key, obs.Now)
		if res.Event != "" {
			kind := corev1.EventTypeNormal
			if res.Warning {
				kind = corev1.EventTypeWarning
			}
			c.events.Eventf(next, nil, kind, res.EventReason, "Rollout", "%s", res.Event)
		}
		log.FromContext(ctx).Info("rollout", "policy", key.Namespace+"/"+key.Name, "phase", res.Status.Phase,
			"step", res.Status.Step, "target", res.Status.TargetRevision, "message", res.Status.Message)
	}
	if res.RequeueAfter > 0 {
		return workflows.RequeueAfter(res.RequeueAfter)
	}
	return nil
}

// serving is, per consumer namespace of a plan, the revision every copy
// of the flag set there holds: its generated ConfigMap and the sync
// server's streams to the namespace; "" when they differ or none is known.
func (c *Controller) serving(ctx context.Context, v *topology.View, f topology.Key, plan *topology.RolloutPlan) map[string]string {
	obs := c.statusWF.Observed(ctx)
	syncs := map[string][]string{}
	for _, subs := range obs.SyncSubscribers(f) {
		for _, h := range subs.Held {
			syncs[subs.Namespace] = append(syncs[subs.Namespace], h.Revision)
		}
	}
	out := make(map[string]string, len(plan.Consumers))
	for _, cons := range plan.Consumers {
		ns := cons.Namespace
		var held []string
		if v.ConfigMapNeeded(topology.ConfigMapKey(f, ns)) {
			rev := ""
			if data, ok := obs.ConfigMapData(ns, topology.ConfigMapName(f)); ok {
				if content, ok := data[topology.ConfigMapDataKey(f)]; ok {
					rev = flagsets.Revision(content)
					if s, _ := v.ServedFor(f, ns); s.Content == content {
						rev = s.Revision
					}
				}
			}
			held = append(held, rev)
		}
		held = append(held, syncs[ns]...)
		rev := ""
		for i, h := range held {
			if i == 0 {
				rev = h
			} else if h != rev {
				rev = ""
				break
			}
		}
		out[ns] = rev
	}
	return out
}

// gateFailure evaluates the policy's gates on the consumers that serve
// the new revision (their pods; the Prometheus queries over their
// namespaces), and says which one fails ("" when all hold), and which one
// could not be evaluated, and when to look again without an event.
func (c *Controller) gateFailure(ctx context.Context, p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan) (failure, unknown string, recheck time.Duration) {
	if len(p.Spec.Gates) == 0 || plan.Target == plan.Stable {
		return "", "", 0
	}
	if plan.Phase != deliveryv1alpha1.PhaseProgressing && plan.Phase != deliveryv1alpha1.PhasePaused {
		return "", "", 0
	}
	if c.opts.PrometheusGates {
		var namespaces []string
		for _, cons := range plan.Consumers {
			if cons.Revision == plan.Target {
				namespaces = append(namespaces, cons.Namespace)
			}
		}
		for _, g := range p.Spec.Gates {
			if g.Type != deliveryv1alpha1.GatePrometheus || g.Prometheus == nil || len(namespaces) == 0 {
				// No consumer serves the new revision (a step of 0 %):
				// nothing to judge, and an empty $namespaces would match
				// every series without the label.
				continue
			}
			q := staging.PrometheusQuery(g.Prometheus.Query, namespaces)
			value, err := queryPrometheus(ctx, g.Prometheus.Address, q)
			if err != nil {
				unknown = "gate Prometheus cannot be read: " + err.Error()
				continue
			}
			if f := staging.PrometheusFailure(g, q, value); f != "" {
				return f, "", 0
			}
		}
	}
	metrics := false
	for _, g := range p.Spec.Gates {
		metrics = metrics || g.Type == deliveryv1alpha1.GateEvaluationErrors
	}
	key := topology.RolloutPolicyKey(p.Namespace, p.Name)
	var pods []staging.Pod
	for _, cons := range plan.Consumers {
		if cons.Revision != plan.Target || len(cons.Workloads) == 0 {
			continue
		}
		list := &corev1.PodList{}
		if err := c.cache.List(ctx, list, client.InNamespace(cons.Namespace)); err != nil {
			continue
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if pod.DeletionTimestamp != nil {
				continue
			}
			res := c.owners.WorkloadOf(ctx, pod.Namespace, pod)
			if !res.OK || !containsKey(cons.Workloads, res.Workload) {
				continue
			}
			sp := staging.PodOf(pod, res.Workload)
			if metrics && sp.ManagementPort != 0 {
				sp.EvaluationErrors, sp.MetricsError = c.evaluationErrors(ctx, key, plan.Target, pod, sp)
			}
			pods = append(pods, sp)
		}
	}
	var since time.Time
	if p.Status.StepStartedAt != nil {
		since = p.Status.StepStartedAt.Time
	}
	now := time.Now()
	return staging.GateFailure(p.Spec.Gates, pods, now, since), unknown, staging.NextCheck(p.Spec.Gates, pods, now)
}

// progressInterval is how often at most a rollout policy's status is
// written while only what its consumers serve changes (the consumer lists,
// the message): the plan's own changes (phase, step, when a step was
// served) are written at once.
const progressInterval = 500 * time.Millisecond

// rolloutWrites remembers when each policy's status was last written.
type rolloutWrites struct {
	mu   sync.Mutex
	last map[topology.Key]time.Time
}

func (w *rolloutWrites) wrote(k topology.Key, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[topology.Key]time.Time{}
	}
	w.last[k] = at
}

// progressWait is how long to wait before writing next over old, when
// next only reports progress and old was written less than
// progressInterval ago; 0 to write now.
func (w *rolloutWrites) progressWait(k topology.Key, old, next deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, now time.Time) time.Duration {
	if !progressOnly(old, next) {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := progressInterval - now.Sub(w.last[k]); left > 0 {
		return left
	}
	return 0
}

// progressOnly tells whether two statuses differ in the consumers'
// progress only: the consumer lists, the message and the conditions'
// messages, not the plan nor any condition's status or reason.
func progressOnly(a, b deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Phase != b.Phase || a.Step != b.Step || a.Approved != b.Approved ||
		a.StableRevision != b.StableRevision || a.TargetRevision != b.TargetRevision || a.ReplacedRevision != b.ReplacedRevision ||
		!equality.Semantic.DeepEqual(a.StepServedAt, b.StepServedAt) || !equality.Semantic.DeepEqual(a.StepStartedAt, b.StepStartedAt) ||
		!slices.Equal(a.Unstaged, b.Unstaged) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason {
			return false
		}
	}
	return true
}

// metricsPoll is how often a running rollout with an EvaluationErrors
// gate reads its consumers' flagd metrics, which no event announces.
const metricsPoll = 5 * time.Second

// errorBaselines are, per rollout policy, target revision and pod, the
// evaluation errors its flagd had counted when the rollout first read it:
// the gate counts what came after. They are the leader's memory only: a
// new leader takes new baselines, so errors counted before it took over do
// not count (docs/delivery.md).
type errorBaselines struct {
	mu   sync.Mutex
	base map[baselineKey]int64
}

type baselineKey struct {
	policy   topology.Key
	revision string
	pod      string
}

// evaluationErrors reads a pod's flagd metrics and returns the evaluation
// errors since the rollout of revision first read them (-1 and why when
// they cannot be read).
func (c *Controller) evaluationErrors(ctx context.Context, policy topology.Key, revision string, pod *corev1.Pod, sp staging.Pod) (int64, string) {
	addr := net.JoinHostPort(sp.IP, strconv.Itoa(int(sp.ManagementPort)))
	if c.opts.PodAddress != nil {
		a, ok := c.opts.PodAddress(pod, injection.SidecarName, sp.ManagementPort)
		if !ok {
			return -1, "no address for the pod's flagd"
		}
		addr = a
	} else if sp.IP == "" {
		return -1, "the pod has no IP yet"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1, "flagd's /metrics answered " + resp.Status
	}
	n, err := staging.EvaluationErrors(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return -1, err.Error()
	}
	b := &c.baselines
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.base == nil {
		b.base = map[baselineKey]int64{}
	}
	k := baselineKey{policy: policy, revision: revision, pod: sp.UID}
	for old := range b.base {
		if old.policy == policy && old.revision != revision {
			delete(b.base, old) // an earlier rollout's
		}
	}
	base, ok := b.base[k]
	if !ok || n < base { // first read, or flagd restarted and counts from 0
		if !ok {
			base = n
		} else {
			base = 0
		}
		b.base[k] = base
	}
	return n - base, ""
}

// prometheusClient queries the Prometheus a gate names: exactly that
// address, so no redirect is followed (it could lead past an admission
// policy on the address) and no proxy of the environment is used.
var prometheusClient = &http.Client{
	Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 5 * time.Second},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// queryPrometheus runs an instant query against a Prometheus HTTP API.
// Its errors are short: they go into the policy's status.
func queryPrometheus(ctx context.Context, address, query string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := strings.TrimSuffix(address, "/") + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := prometheusClient.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL, with the query, is not worth repeating
		}
		return 0, fmt.Errorf("%s: %w", address, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return 0, fmt.Errorf("%s answered %s: redirects are not followed", address, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, err
	}
	v, err := staging.PrometheusValue(body)
	if err != nil {
		return 0, fmt.Errorf("%s: %s", address, workflows.Cut(err.Error(), 256))
	}
	return v, nil
}

func containsKey(keys []topology.Key, k topology.Key) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// enqueueRolloutsOf puts the rollout policies of a flag set on their queue:
// what its consumers serve may have changed.
func (c *Controller) enqueueRolloutsOf(v *topology.View, f topology.Key) {
	for _, p := range v.RolloutPoliciesOf(f) {
		c.rollouts.Add(topology.RolloutPolicyKey(p.Namespace, p.Name))
	}
}

// enqueueRunningRolloutsIn puts the running rollouts with consumers in
// namespace on their queue: a pod there changed, which a gate may read.
func (c *Controller) enqueueRunningRolloutsIn(namespace string) {
	v := c.topo.Snapshot()
	for _, k := range v.RolloutPolicies() {
		p, ok := v.RolloutPolicy(k)
		if !ok || (p.Status.Phase != deliveryv1alpha1.PhaseProgressing && p.Status.Phase != deliveryv1alpha1.PhasePaused) || len(p.Spec.Gates) == 0 {
			continue
		}
		plan := v.RolloutPlan(topology.FlagSetKey(p.Namespace, p.Spec.TargetRef.Name))
		if plan == nil {
			continue
		}
		for _, cons := range plan.Consumers {
			if cons.Namespace == namespace {
				c.rollouts.Add(k)
				break
			}
		}
	}
}
