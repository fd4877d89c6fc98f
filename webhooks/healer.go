package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// Reasons of the Event on a workload that the Healer restarts.
const (
	// EventInjectionMissing: a pod created after its workload was targeted
	// never reached the webhook (it carries no admission record of
	// flagplane's), or lacks flag sets whose ConfigMaps exist now.
	EventInjectionMissing = "InjectionMissing"
	// EventTargeted: the workload's pods were admitted before flagplane
	// knew of the source (or annotation, or grant) that targets it now:
	// they were created before it, or the webhook admitted them with
	// nothing to inject (rollout.AnnotationAdmitted).
	EventTargeted = "Targeted"
)

// Healer notices, from the cache, pods of a workload that flagplane injects
// into which run without their injection — admitted while the webhook was
// unavailable (its failurePolicy is Ignore), or incomplete because a
// ConfigMap could not be made to exist then — and restarts the workload the
// way `kubectl rollout restart` does, with a Warning Event on it, so that
// no pod silently runs without flags.
//
// This includes the pods a workload had before a source came to target it:
// a new standing order takes effect on running pods, the way editing the
// pod template's annotations rolls them, rather than leave them without
// flags until their next restart. A workload whose pods have an older
// injection (the fingerprint differs) is not the Healer's: that is
// rolloutOnChange's (rollout.Reconciler).
//
// A pod counts when it is not terminating, was created after the
// workload's last restart (older pods are being replaced already), and
// lacks AnnotationInjection (or has AnnotationIncomplete while the
// ConfigMaps it lacked and its workload still mounts exist now, or AnnotationUnresolved while what it
// would get now differs from what it got: a source or in-process
// configuration its annotations name has appeared or been permitted since;
// or AnnotationRefused while its workload's injection differs from the one
// it recorded). A workload is restarted at most once per
// Backoff, so that pods admitted while the webhook is still unreachable do
// not roll it in a loop (not for a reference that resolved: its new pods
// get it; and sooner for a pod that reached the webhook: see backoff).
// Pods are checked as their events arrive and every
// Resync. Only the leader heals.
//
// The controllers run the Healer on a queue of theirs keyed by workload
// (controllers.Controller.AddHealer), with Resync and Workers: pod events,
// the workloads of every Delta and every pod each Resync feed it.
type Healer struct {
	Graph    Graph
	Resolver restarts.Owners
	// Cache is the manager's cache: what Heal reads unless Reader is set.
	Cache  client.Reader
	Reader client.Reader
	// Client writes the restarts.
	Client  client.Client
	Events  events.EventRecorder
	Options injection.Options
	// Generated tells the ConfigMaps flagplane generates (its managed-by
	// label) from others of their names.
	Generated workflows.GeneratedMetadata
	Resync    time.Duration
	Backoff   time.Duration
	// Workers is how many workloads are healed at once (default 2); one
	// workload is never healed by two workers at once.
	Workers int
	Now     func() time.Time

	mu       sync.Mutex
	lastHeal map[topology.Key]time.Time
	// lastCulprit is the pod each workload was last restarted for: once
	// restarted for it, the pod is being replaced, even while the cache
	// does not show the restart yet.
	lastCulprit map[topology.Key]types.UID
	// targetedSince is when this process saw each targeted workload become
	// targeted: a pod older than that predates its targeting.
	targetedSince map[topology.Key]time.Time
	// streak counts each workload's restarts, each within Backoff of the
	// one before.
	streak map[topology.Key]int
}

// admittedRetry is the least time between the first two restarts of a
// workload for pods that reached the webhook; it doubles with each
// restart after, up to Backoff.
const admittedRetry = 5 * time.Second

// backoff is the least time between the workload's last restart and one
// for culprit. Backoff keeps pods that keep missing the webhook (it fails
// open) from rolling the workload in a loop. A pod that reached it is
// another case:
//   - admitted with nothing to inject: the replica that admitted it did
//     not know the workload's targeting yet, and each successor is
//     admitted on a newer graph;
//   - incomplete: it is healed only once the ConfigMaps it lacked exist,
//     and its successor is admitted with them.
//
// Holding such a pod back for all of Backoff after an earlier restart
// would leave the workload without its flags for minutes; its restarts
// back off from admittedRetry instead, so that a replica that lags is
// waited out in seconds and one that never catches up rolls the workload
// a few times and then once per Backoff.
func (h *Healer) backoff(w topology.Key, culprit *corev1.Pod, again bool) time.Duration {
	_, injected := culprit.Annotations[restarts.AnnotationInjection]
	_, incomplete := culprit.Annotations[restarts.AnnotationIncomplete]
	admittedNothing := !injected && culprit.Annotations[restarts.AnnotationAdmitted] == restarts.AdmittedNothingToInject
	if again || !(admittedNothing || incomplete) {
		return h.Backoff
	}
	h.mu.Lock()
	n := h.streak[w]
	h.mu.Unlock()
	wait := admittedRetry
	for i := 1; i < n && wait < h.Backoff; i++ {
		wait *= 2
	}
	return min(wait, h.Backoff)
}

// WorkloadsChanged hears the workloads of every Delta (see
// controllers.Controller.OnWorkloadsChanged): a workload that has just become
// targeted is looked at at once, so that pods it started before are rolled
// within moments rather than at the next resync. It returns at once.
func (h *Healer) WorkloadsChanged(workloads []topology.Key) {
	v := h.Graph.Topology().Snapshot()
	now := h.now()
	// While the graph is being built from the caches, workloads are not
	// becoming targeted: this process is learning that they are.
	built := h.Graph.GraphBuilt()
	h.mu.Lock()
	if h.targetedSince == nil {
		h.targetedSince = map[topology.Key]time.Time{}
	}
	for _, w := range workloads {
		if !built {
			continue
		}
		targeted := len(v.SourcesOfWorkload(w))+len(v.InProcessConfigsOfWorkload(w)) > 0
		_, seen := h.targetedSince[w]
		switch {
		case targeted && !seen:
			h.targetedSince[w] = now
		case !targeted:
			delete(h.targetedSince, w)
		}
	}
	h.mu.Unlock()
}

func (h *Healer) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// NeedsLook tells whether a pod lacks (part of) its injection by its
// annotations.
func (h *Healer) NeedsLook(pod *corev1.Pod) bool { return needsLook(pod) }

// needsLook tells whether a pod lacks (part of) its injection by its annotations.
func needsLook(pod metav1.Object) bool {
	if pod.GetDeletionTimestamp() != nil {
		return false
	}
	a := pod.GetAnnotations()
	_, injected := a[restarts.AnnotationInjection]
	_, incomplete := a[restarts.AnnotationIncomplete]
	_, unresolved := a[restarts.AnnotationUnresolved]
	_, refused := a[restarts.AnnotationRefused]
	return !injected || incomplete || unresolved || refused
}

// Heal restarts the workload if one of its pods lacks its injection. It
// returns when to look again if the backoff holds the restart back.
func (h *Healer) Heal(ctx context.Context, w topology.Key) (time.Duration, error) {
	h.mu.Lock()
	if h.lastHeal == nil {
		h.lastHeal = map[topology.Key]time.Time{}
		h.lastCulprit = map[topology.Key]types.UID{}
		h.streak = map[topology.Key]int{}
	}
	h.mu.Unlock()
	v := h.Graph.Topology().Snapshot()
	inj := injection.Desired(v, w, h.Options)
	if inj.Empty() {
		return 0, nil
	}
	obj, pods, err := restarts.WorkloadPods{Reader: h.reader()}.CurrentPods(ctx, w)
	if err != nil || obj == nil {
		return 0, err
	}
	var culprit *corev1.Pod
	var lack lacked // the culprit's, when it is incomplete
	resolved := false
	for i := range pods {
		p := &pods[i]
		if !needsLook(p) {
			continue
		}
		got := p.Annotations[restarts.AnnotationInjection]
		_, incomplete := p.Annotations[restarts.AnnotationIncomplete]
		// Incomplete whether or not it got anything: a pod whose only
		// ConfigMap was missing got no sidecar, and an empty fingerprint.
		if incomplete {
			if lack = h.lackedNow(ctx, p, inj); len(lack.exist) == 0 {
				// Still nothing better to give it: what it lacks is still
				// missing, or it is no longer the workload's (a changed
				// injection is rolloutOnChange's).
				continue
			}
		}
		if !incomplete && got != "" {
			// Admitted with references that did not resolve: rolled only
			// once something of them has.
			if got == inj.Fingerprint() {
				continue
			}
			resolved = true
		}
		culprit = p
		break
	}
	if culprit == nil {
		return 0, nil
	}
	now := h.now()
	h.mu.Lock()
	last, healed := h.lastHeal[w]
	again := h.lastCulprit[w] == culprit.UID
	h.mu.Unlock()
	// The backoff keeps pods that keep missing the webhook from rolling
	// the workload in a loop. A pod rolled because a reference resolved is
	// replaced by one that has it: no loop, and no reason to wait, unless
	// the workload was restarted for this very pod already.
	if resolved && again {
		return 0, nil
	}
	if wait := h.backoff(w, culprit, again); healed && now.Sub(last) < wait && !resolved {
		return wait - now.Sub(last), nil
	}
	if err := restarts.Restart(ctx, h.Client, obj, now); err != nil {
		return 0, err
	}
	h.mu.Lock()
	h.lastHeal[w] = now
	h.lastCulprit[w] = culprit.UID
	if healed && now.Sub(last) < h.Backoff {
		h.streak[w]++
	} else {
		h.streak[w] = 1
	}
	h.mu.Unlock()
	reason, why := h.why(v, w, culprit, lack)
	if _, refused := culprit.Annotations[restarts.AnnotationRefused]; refused {
		// Its workload's injection has changed since the sidecar was
		// refused (PodMutator): its successor gets what it is now.
		reason, why = EventInjectionMissing, "was admitted without its flagd sidecar ("+culprit.Annotations[restarts.AnnotationRefused]+
			"), and its workload's injection has changed since"
	} else if resolved {
		reason, why = EventTargeted, "was admitted without "+culprit.Annotations[restarts.AnnotationUnresolved]+
			", which its annotations name and which did not resolve then"
	}
	log.FromContext(ctx).Info("restarted a workload whose pod runs without its flags", "Pod", klog.KObj(culprit), "reason", reason)
	// The note names flag sets and sources, which can pass an Event's
	// limit: Warn cuts it.
	workflows.Warn(h.Events, obj, reason, "Heal",
		"pod %s %s: restarted the %s so that its pods get their flags", culprit.Name, why, w.Kind)
	return 0, nil
}

// why says why a pod of w lacks its injection, from what the pod records
// of its admission and when this process saw w become targeted. The
// webhook marks every pod it admits: with AnnotationInjection, or with
// AnnotationAdmitted when it had nothing to inject. A pod with neither was
// never seen by it. Creation times have whole seconds; within the second
// of the targeting, the pod's record decides.
func (h *Healer) why(v *topology.View, w topology.Key, pod *corev1.Pod, lack lacked) (reason, why string) {
	if _, incomplete := pod.Annotations[restarts.AnnotationIncomplete]; incomplete {
		// What the decision to heal found, not a second look at the cache.
		return EventInjectionMissing, lack.String()
	}
	h.mu.Lock()
	since, known := h.targetedSince[w]
	h.mu.Unlock()
	created := pod.CreationTimestamp.Time // whole seconds
	before := known && created.Before(since.Truncate(time.Second))
	by := targetedBy(v, w)
	_, admitted := pod.Annotations[restarts.AnnotationAdmitted]
	switch {
	case before:
		return EventTargeted, fmt.Sprintf("was created before the %s was targeted by %s", w.Kind, by)
	case admitted:
		// The webhook saw it, and the replica that admitted it did not know
		// of the targeting yet: it came later, or reached that replica later.
		return EventTargeted, fmt.Sprintf("was admitted with nothing to inject, before flagplane knew the %s was targeted by %s", w.Kind, by)
	case known:
		return EventInjectionMissing, fmt.Sprintf("was created after the %s was targeted by %s and never reached the admission webhook "+
			"(it fails open: it was unavailable or timed out)", w.Kind, by)
	}
	return EventInjectionMissing, fmt.Sprintf("runs without its flagd injection and never reached the admission webhook "+
		"(it fails open: it was unavailable or timed out, or the pod predates flagplane); the %s is targeted by %s", w.Kind, by)
}

// targetedBy names the sources and in-process configurations of a workload.
func targetedBy(v *topology.View, w topology.Key) string {
	var names []string
	for _, k := range append(v.SourcesOfWorkload(w), v.InProcessConfigsOfWorkload(w)...) {
		names = append(names, string(k.Kind)+" "+k.Namespace+"/"+k.Name)
	}
	return strings.Join(names, ", ")
}

func (h *Healer) reader() client.Reader {
	if h.Reader != nil {
		return h.Reader
	}
	return h.Cache
}

// lacked is what an incomplete pod (rollout.AnnotationIncomplete) was
// admitted without, as its workload's injection stands now: the flag sets
// whose ConfigMaps exist now, those whose ConfigMaps are still missing
// (named by ConfigMap), and those its workload no longer reads from a
// ConfigMap.
type lacked struct {
	exist, missing, gone []string
}

// lackedNow looks up, in the cache, the ConfigMap of each flag set pod was
// admitted without. A pod is healed once every one its workload still
// mounts exists: the restarted pods get them all.
func (h *Healer) lackedNow(ctx context.Context, pod *corev1.Pod, inj *injection.Injection) lacked {
	var out lacked
	for _, name := range strings.Split(pod.Annotations[restarts.AnnotationIncomplete], ",") {
		ns, n, ok := strings.Cut(name, "/")
		if !ok {
			continue
		}
		want := topology.ConfigMapKey(topology.FlagSetKey(ns, n), pod.Namespace)
		switch {
		case !slices.Contains(inj.ConfigMaps, want):
			out.gone = append(out.gone, name)
		case !h.generatedExists(ctx, want):
			out.missing = append(out.missing, name+" (ConfigMap "+pod.Namespace+"/"+topology.ConfigMapName(want.FlagSet())+")")
		default:
			out.exist = append(out.exist, name)
		}
	}
	if len(out.missing) > 0 {
		// The restarted pods would lack those still: nothing better yet.
		out.exist = nil
	}
	return out
}

// generatedExists tells whether the ConfigMap of cm exists and is
// flagplane's: an object of its name that flagplane does not manage is
// never mounted (ConfigMapEnsurer), so a pod restarted for it would lack
// the flag set again.
func (h *Healer) generatedExists(ctx context.Context, cm topology.Key) bool {
	obj := &corev1.ConfigMap{}
	return h.reader().Get(ctx, objectKeyOf(cm), obj) == nil && h.Generated.Owns(obj.Labels)
}

// String says what was found, as the Event on the restarted workload
// tells it.
func (l lacked) String() string {
	msg := "was admitted without flag sets whose ConfigMaps could not be written then; they exist now: " + strings.Join(l.exist, ", ")
	if len(l.gone) > 0 {
		msg += " (no longer mounted: " + strings.Join(l.gone, ", ") + ")"
	}
	return msg
}
