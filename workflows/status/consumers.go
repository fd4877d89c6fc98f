package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// maxConsumers caps status.consumers (the CRD's MaxItems).
const maxConsumers = 32

// delivery gives a flag set's revision (its rendering's) and, over the
// consumers whose revision flagplane observes, which hold it: "<up to
// date>/<all>" and the consumers, those behind first. The consumers are its
// generated ConfigMaps as the cache holds them (copies), and the sync
// server's streams of each subscriber namespace (syncConsumer). A consumer
// keeps its Since while it holds the same revision.
func delivery(facts topology.FlagSetFacts, copies *CopiesReader, obs Observed, prev []v1beta1.ConsumerRevision) (string, string, []v1beta1.ConsumerRevision) {
	revision := facts.Rendered.Revision
	if revision == "" {
		return "", "", nil
	}
	c := facts.Consumers
	// Up to date is holding what the plan gives the namespace: the flag
	// set's revision, unless a rollout holds the namespace at another.
	want := func(ns string) string {
		if !c.Staged {
			return revision
		}
		return copyPlan(c, ns).Served.Revision
	}
	planned := map[string]string{}
	var consumers []v1beta1.ConsumerRevision
	upToDate := 0
	for _, ns := range c.ConfigMaps {
		held := copies.In(ns)
		if !held.ConfigMap {
			continue
		}
		wantRevision := want(ns)
		planned[ns] = wantRevision
		cr := v1beta1.ConsumerRevision{Kind: "ConfigMap", Namespace: ns, Name: c.ConfigMapName}
		if held.ConfigMapHeld {
			cr.Revision = held.ConfigMapRevision
		}
		if cr.Revision == wantRevision {
			upToDate++
		}
		cr.Since = sinceOf(prev, cr, time.Time{})
		consumers = append(consumers, cr)
	}
	var syncs []SyncSubscribers
	if so, ok := obs.(SyncObserved); ok {
		syncs = so.SyncSubscribers(facts.Key)
	}
	for _, subs := range syncs {
		cr, at, ok := syncConsumer(facts.Key, subs, want(subs.Namespace))
		if !ok {
			continue
		}
		if cr.Revision == want(subs.Namespace) {
			upToDate++
		}
		cr.Since = sinceOf(prev, cr, at)
		consumers = append(consumers, cr)
	}
	if len(consumers) == 0 {
		return revision, "", nil
	}
	delivered := fmt.Sprintf("%d/%d", upToDate, len(consumers))
	plannedOf := func(c v1beta1.ConsumerRevision) string {
		if c.Kind == "ConfigMap" {
			return planned[c.Namespace]
		}
		return want(c.Namespace)
	}
	slices.SortStableFunc(consumers, func(a, b v1beta1.ConsumerRevision) int {
		// Those behind first; then ConfigMaps by namespace, as
		// ConsumerNamespaces lists them, then sync subscribers by namespace.
		return cmp.Compare(boolInt(a.Revision == plannedOf(a)), boolInt(b.Revision == plannedOf(b)))
	})
	return revision, delivered, consumers[:min(len(consumers), maxConsumers)]
}

// syncConsumer is the consumer that stands for the sync server's streams of
// a flag set to one namespace: up to date (Revision) when every stream was
// sent revision; else it shows the streams furthest behind: those sent
// nothing yet, else those whose revision was sent the longest ago. at is
// when the streams shown got their revision (zero when unknown).
func syncConsumer(flagSet topology.Key, subs SyncSubscribers, revision string) (c v1beta1.ConsumerRevision, at time.Time, ok bool) {
	c = v1beta1.ConsumerRevision{Kind: KindSyncSubscribers, Namespace: subs.Namespace,
		Name: topology.GroupOpenFeature + "/" + flagSet.Namespace + "/" + flagSet.Name}
	var behind *HeldRevision
	for i, h := range subs.Held {
		c.Streams += h.Streams
		if h.Revision == revision {
			c.Current += h.Streams
			continue
		}
		if behind == nil || h.Revision == "" || (behind.Revision != "" && h.Since.Before(behind.Since)) {
			behind = &subs.Held[i]
		}
	}
	if c.Streams == 0 {
		return c, at, false
	}
	if behind == nil {
		c.Revision = revision
		for _, h := range subs.Held {
			if h.Revision == revision {
				at = h.Since
			}
		}
		return c, at, true
	}
	c.Revision = behind.Revision
	return c, behind.Since, true
}

// unobserved says why the readers of a flag set whose revision flagplane
// cannot ask (topology.UnobservedReaders) are not among its consumers: the
// workloads and Flagds that read it with the kubernetes provider, and the
// workloads whose in-process SDKs read it; nil when there are none.
func unobserved(u topology.UnobservedReaders) *v1beta1.UnobservedConsumers {
	workloads, flagds, inProcess := u.Workloads, u.Flagds, u.InProcess
	if workloads+flagds+inProcess == 0 {
		return nil
	}
	var why []string
	if workloads+flagds > 0 {
		why = append(why, "they read the FeatureFlag from the API server with the kubernetes provider: which revision their flagd holds is not reported to flagplane")
	}
	if inProcess > 0 {
		why = append(why, "in-process SDKs evaluate inside the application: none reports its revision to flagplane (consumers say what flagplane's sync server sent to its subscribers)")
	}
	return &v1beta1.UnobservedConsumers{Workloads: int32(workloads), Flagds: int32(flagds), InProcess: int32(inProcess),
		Reason: strings.Join(why, "; ")}
}

// sinceOf keeps the Since of a consumer that held the same revision before;
// else it is at, when known, or now.
func sinceOf(prev []v1beta1.ConsumerRevision, c v1beta1.ConsumerRevision, at time.Time) *metav1.Time {
	if c.Revision == "" {
		return nil
	}
	for _, before := range prev {
		if before.Kind == c.Kind && before.Namespace == c.Namespace && before.Name == c.Name && before.Revision == c.Revision && before.Since != nil {
			return before.Since
		}
	}
	if !at.IsZero() {
		t := metav1.NewTime(at)
		return &t
	}
	now := metav1.Now()
	return &now
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
