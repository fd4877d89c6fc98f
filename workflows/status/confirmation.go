package status

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/confirm"
	"github.com/flagplane/flagplane/workflows/injection"
)

// Delivery is confirmed by the consumers' flagds, not by flagplane's own
// writes: a FeatureFlag's copies may hold its revision (Delivered) while
// the kubelet has not projected the ConfigMap into a pod's volume yet, or
// while a flagd refuses the content or does not run. The pods that read a
// flag set through a flagd flagplane can ask — an injected sidecar (the
// file and flagd-proxy providers) or a Flagd's pod — are asked which
// revision they serve (confirm.Prober), and the FeatureFlag's status
// counts them (Confirmed, Serving). Ready waits for them; past the bound a
// pod not confirmed makes it Stalled, naming the pod and what its flagd
// answered.

// ConfirmObserved is what an Observed that asks the consumers' flagds
// implements too (CacheObserved with a Confirmer).
type ConfirmObserved interface {
	// Confirm tells what the pods of readers (workloads and Flagds of
	// namespace) serve of flag set f, whose revision planned for them has
	// flags flags; held says that every copy of f in namespace holds it
	// (else no pod is asked: none can serve it yet).
	Confirm(f topology.Key, namespace string, readers []topology.Key, revision string, flags int, held bool) Serving
	// ConfirmBound is how long a pod may take to confirm a revision its
	// copy holds before the flag set is Stalled; ConfirmNow, the clock.
	ConfirmBound() time.Duration
	ConfirmNow() time.Time
}

// Serving is what Confirm tells of a namespace's pods: what the status
// counts, and how many of Pods were not read yet.
type Serving struct {
	v1beta1.NamespaceServing
	// Unread counts the pods of Pods whose flagd was not read since the
	// copy got the revision: what they serve is not known yet (a manager
	// that just took the lead has read none), and none of them is known
	// to serve another revision.
	Unread int32
}

// DefaultConfirmBound is Confirmer.Bound's default: the kubelet's default
// sync (a minute, and its jitter) projects a ConfigMap well within it.
const DefaultConfirmBound = 3 * time.Minute

// Confirmer asks the consumers' flagds, through its Prober, from the pods
// the cache holds.
type Confirmer struct {
	// Reader is the manager's cache (pods, slim: restarts.SlimPod).
	Reader client.Reader
	// WorkloadOf resolves a pod to its workload.
	WorkloadOf func(ctx context.Context, pod *corev1.Pod) (topology.Key, bool)
	Prober     *confirm.Prober
	// PodAddress, when set, is where a container's port of a pod is
	// reached (tests whose pods have no routable IP); nil: the pod's IP.
	PodAddress func(pod *corev1.Pod, container string, port int32) (string, bool)
	// SidecarSyncPort is the sync port of the injected flagd (flagd's
	// default, 8015, when 0); FlagdSyncPort, a Flagd's.
	SidecarSyncPort, FlagdSyncPort int32
	// Bound: DefaultConfirmBound when 0.
	Bound time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu sync.Mutex
	// held is, per flag set and namespace, the revision its copies were
	// last seen holding, and since when: a reading of a pod made before
	// confirms nothing (the pod may have served that revision before an
	// edit, and another one since).
	held      map[heldKey]heldSince
	lastPrune time.Time
}

type heldKey struct {
	flagSet   topology.Key
	namespace string
}

type heldSince struct {
	revision   string
	since, use time.Time
}

// since is since when the copies of f in namespace hold revision, as this
// Confirmer first saw them hold it. It forgets, now and then, what it was
// not asked about for ten minutes (a deleted flag set's).
func (c *Confirmer) since(f topology.Key, namespace, revision string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[heldKey]heldSince{}
	}
	k := heldKey{f, namespace}
	h, ok := c.held[k]
	if !ok || h.revision != revision {
		h = heldSince{revision: revision, since: now}
	}
	h.use = now
	c.held[k] = h
	if now.Sub(c.lastPrune) > 10*time.Minute {
		c.lastPrune = now
		for k, h := range c.held {
			if now.Sub(h.use) > 10*time.Minute {
				delete(c.held, k)
			}
		}
	}
	return h.since
}

// flagdSyncPort is flagd's default sync port.
const flagdSyncPort = 8015

// Confirm implements ConfirmObserved for CacheObserved.
func (o CacheObserved) Confirm(f topology.Key, namespace string, readers []topology.Key, revision string, flags int, held bool) Serving {
	if o.Confirmer == nil {
		return Serving{NamespaceServing: v1beta1.NamespaceServing{Namespace: namespace, Revision: revision}}
	}
	return o.Confirmer.confirm(o.Ctx, f, namespace, readers, revision, flags, held)
}

// ConfirmBound implements ConfirmObserved.
func (o CacheObserved) ConfirmBound() time.Duration {
	if o.Confirmer == nil {
		return DefaultConfirmBound
	}
	return cmp.Or(o.Confirmer.Bound, DefaultConfirmBound)
}

// ConfirmNow implements ConfirmObserved.
func (o CacheObserved) ConfirmNow() time.Time { return o.Confirmer.now() }

func (c *Confirmer) now() time.Time {
	if c != nil && c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// podRead is one pod to count: where its flagd is asked, or why it is not.
type podRead struct {
	pod      confirm.Pod
	name     string
	notAsked string
	// starting: it has no IP yet; ready: its Ready condition.
	starting, ready bool
}

// confirm counts what the pods of readers in namespace serve of f, and
// asks the Prober to read those whose last reading, made since the copies
// got revision, does not confirm it.
func (c *Confirmer) confirm(ctx context.Context, f topology.Key, namespace string, readers []topology.Key, revision string, flags int, held bool) Serving {
	out := Serving{NamespaceServing: v1beta1.NamespaceServing{Namespace: namespace, Revision: revision}}
	var since time.Time
	if held {
		since = c.since(f, namespace, revision, c.now())
		// Status keeps seconds: the status compared with the one stored
		// must hold what the API server gives back.
		out.Since = &metav1.Time{Time: since.Truncate(time.Second)}
	}
	pods := c.pods(ctx, namespace, readers)
	others := map[string]int32{}
	notAsked := ""
	name := f.Namespace + "/" + f.Name
	for _, p := range pods {
		if p.starting {
			out.Starting++
			continue
		}
		if p.notAsked != "" {
			out.NotAsked++
			notAsked = cmp.Or(notAsked, fmt.Sprintf("pod %s %s", p.name, p.notAsked))
			continue
		}
		out.Pods++
		if since.IsZero() {
			others[""]++
			out.Reason = cmp.Or(out.Reason, fmt.Sprintf("its copy does not hold revision %s yet", topology.ShortRevision(revision)))
			continue
		}
		r, read := c.Prober.Reading(p.pod.UID)
		fresh := read && !r.At.Before(since)
		if fresh && r.Err == "" {
			ok, why := r.Served.Confirm(name, revision, flags)
			if ok {
				out.Confirmed++
				continue
			}
			others[servedRevision(r.Served, name)]++
			if servedRevision(r.Served, name) != "" {
				// Another revision of it: the copy's new content is not
				// in flagd (not projected into the pod's volume yet, or
				// refused by flagd, which keeps what it had).
				why += ", not the one its copy holds: not projected into the pod yet, or refused by flagd"
			}
			out.Reason = cmp.Or(out.Reason, fmt.Sprintf("pod %s: %s", p.name, why))
		} else {
			others[""]++
			switch {
			case fresh && !p.ready:
				out.Reason = cmp.Or(out.Reason, fmt.Sprintf("pod %s (not Ready): its flagd cannot be read: %s", p.name, r.Err))
			case fresh:
				out.Reason = cmp.Or(out.Reason, fmt.Sprintf("pod %s: its flagd cannot be read: %s", p.name, r.Err))
			default:
				out.Unread++
				out.Reason = cmp.Or(out.Reason, fmt.Sprintf("pod %s: its flagd was not read since its copy got revision %s", p.name, topology.ShortRevision(revision)))
			}
		}
		c.Prober.Want(p.pod, f, since)
	}
	// A pod not asked is said only when no pod asked is behind.
	out.Reason = cmp.Or(out.Reason, notAsked)
	for rev, n := range others {
		out.Others = append(out.Others, v1beta1.RevisionPods{Revision: rev, Pods: n})
	}
	slices.SortFunc(out.Others, func(a, b v1beta1.RevisionPods) int {
		return cmp.Or(cmp.Compare(b.Pods, a.Pods), strings.Compare(a.Revision, b.Revision))
	})
	if len(out.Others) > 8 {
		out.Others = out.Others[:8]
	}
	return out
}

// servedRevision is the one revision of flag set name a flagd serves, ""
// when it serves none or several.
func servedRevision(s confirm.Served, name string) string {
	if fs, ok := s.FlagSets[name]; ok && len(fs.Revisions) == 1 {
		return fs.Revisions[0]
	}
	return ""
}

// pods lists the pods of readers in namespace, from the cache, and where
// each one's flagd is asked: a workload's pods on their injected
// sidecar's sync port, a Flagd's on its own.
func (c *Confirmer) pods(ctx context.Context, namespace string, readers []topology.Key) []podRead {
	if len(readers) == 0 {
		return nil
	}
	list := &corev1.PodList{}
	// Read, never changed: the cache's own objects.
	if err := c.Reader.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []podRead
	// The pods of one ReplicaSet (or any controller) have one workload:
	// resolved once, not once per pod.
	type owned struct {
		w  topology.Key
		ok bool
	}
	byOwner := map[types.UID]owned{}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		var w topology.Key
		var ok bool
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.UID != "" {
			o, seen := byOwner[ref.UID]
			if !seen {
				o.w, o.ok = c.WorkloadOf(ctx, pod)
				byOwner[ref.UID] = o
			}
			w, ok = o.w, o.ok
		} else {
			w, ok = c.WorkloadOf(ctx, pod)
		}
		if !ok {
			continue
		}
		// A workload's pods are asked on the injected sidecar, a Flagd's
		// on its flagd container (both are named flagd).
		sidecar, port := false, int32(0)
		switch {
		case slices.Contains(readers, w):
			sidecar, port = true, cmp.Or(c.SidecarSyncPort, flagdSyncPort)
		case w.Kind == topology.KindDeployment && slices.Contains(readers, topology.FlagdKey(w.Namespace, w.Name)):
			port = cmp.Or(c.FlagdSyncPort, flagdSyncPort)
		default:
			continue
		}
		container := injection.SidecarName
		p := podRead{name: pod.Name, pod: confirm.Pod{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name}, ready: isReady(pod)}
		switch {
		case sidecar && !hasSidecar(pod):
			p.notAsked = "has no flagd sidecar (it was created before the sidecar was injected)"
		case pod.Spec.HostNetwork:
			p.notAsked = "runs on the host's network: its flagd is not asked"
		default:
			p.pod.Address, ok = c.address(pod, container, port)
			p.starting = !ok
		}
		out = append(out, p)
	}
	return out
}

func isReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hasSidecar tells whether pod runs the flagd sidecar flagplane injects
// (a native sidecar: an init container that always restarts).
func hasSidecar(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == injection.SidecarName && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

func (c *Confirmer) address(pod *corev1.Pod, container string, port int32) (string, bool) {
	if c.PodAddress != nil {
		return c.PodAddress(pod, container, port)
	}
	if pod.Status.PodIP == "" {
		return "", false
	}
	return confirm.Address(pod.Status.PodIP, port), true
}

// confirmation is what the pods that read a flag set serve of it, per
// namespace (Serving, those not confirmed first, at most 32), and their
// count ("<confirmed>/<pods>"; "" when none is asked). The revision
// planned for a namespace is the plan's under a staged rollout, else
// revision; copies say whether the namespace's copies hold it.
func confirmation(c topology.Consumers, revision string, flags int, copies *CopiesReader, obs ConfirmObserved) (string, []v1beta1.NamespaceServing) {
	var all []v1beta1.NamespaceServing
	var pods, confirmed int32
	for _, r := range c.Readers {
		if len(r.Workloads) == 0 {
			continue
		}
		want, n := revision, flags
		if c.Staged {
			planned := copyPlan(c, r.Namespace)
			want = planned.Revision
			if want != revision {
				n = flagsOf(planned.Served.Content)
			}
		}
		ns := obs.Confirm(c.FlagSet, r.Namespace, r.Workloads, want, n, copies.In(r.Namespace).Held() == want)
		if ns.Pods == 0 && ns.Starting == 0 && ns.NotAsked == 0 {
			continue
		}
		pods, confirmed = pods+ns.Pods, confirmed+ns.Confirmed
		all = append(all, ns.NamespaceServing)
	}
	if pods == 0 {
		return "", nil
	}
	slices.SortStableFunc(all, func(a, b v1beta1.NamespaceServing) int {
		return cmp.Compare(b.Pods-b.Confirmed, a.Pods-a.Confirmed)
	})
	if len(all) > 32 {
		all = all[:32]
	}
	return fmt.Sprintf("%d/%d", confirmed, pods), all
}

// RenderedFlags is how many flags revision of f has, as the graph rendered
// it (1 when it does not know it: a revision with flags is the common case).
func RenderedFlags(v *topology.View, f topology.Key, revision string) int {
	r, ok := v.RevisionRendered(f, revision)
	if !ok {
		return 1
	}
	return flagsOf(r.Content)
}

// flagsOf is how many flags a rendering's content has (1 when it cannot
// tell: "" is a revision the graph does not know).
func flagsOf(content string) int {
	var doc struct {
		Flags map[string]json.RawMessage `json:"flags"`
	}
	if json.Unmarshal([]byte(content), &doc) != nil {
		return 1
	}
	return len(doc.Flags)
}

// unconfirmed is the first namespace with a pod not confirmed, and whether
// its wait passed bound.
func unconfirmed(serving []v1beta1.NamespaceServing, now time.Time, bound time.Duration) (v1beta1.NamespaceServing, bool, bool) {
	var first v1beta1.NamespaceServing
	found := false
	for _, s := range serving {
		if s.Confirmed == s.Pods {
			continue
		}
		if s.Since != nil && now.Sub(s.Since.Time) > bound {
			return s, true, true
		}
		if !found {
			first, found = s, true
		}
	}
	return first, found, false
}
