package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/hack/fleetbench/nsfleet"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

const (
	flagSetName   = "checkout"
	placementName = "checkout-everywhere"
)

// tracker notes when every one of a set of keys first satisfied the
// current revision, as watch events arrive. It keeps what each key said
// last, so that a reset counts the keys that hold the new revision
// already (a halt's stable revision, on clusters it never left).
type tracker struct {
	mu     sync.Mutex
	rev    string
	need   int
	latest map[string]func(rev string) bool
	ok     map[string]bool
	allAt  time.Time
	done   chan struct{}
}

func newTracker(need int) *tracker {
	return &tracker{need: need, latest: map[string]func(string) bool{}, ok: map[string]bool{}, done: make(chan struct{})}
}

// reset waits for rev from now on.
func (t *tracker) reset(rev string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rev, t.ok, t.allAt, t.done = rev, map[string]bool{}, time.Time{}, make(chan struct{})
	for key, satisfied := range t.latest {
		t.judge(key, satisfied)
	}
}

// see notes whether key holds rev (by what satisfied says of it).
func (t *tracker) see(key string, satisfied func(rev string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.latest[key] = satisfied
	t.judge(key, satisfied)
}

func (t *tracker) judge(key string, satisfied func(rev string) bool) {
	if t.rev == "" || !t.allAt.IsZero() {
		return
	}
	if satisfied(t.rev) {
		t.ok[key] = true
	} else {
		delete(t.ok, key)
	}
	if len(t.ok) >= t.need {
		t.allAt = time.Now()
		close(t.done)
	}
}

func (t *tracker) wait(ctx context.Context, timeout time.Duration) (time.Time, error) {
	t.mu.Lock()
	done := t.done
	t.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(timeout):
		t.mu.Lock()
		defer t.mu.Unlock()
		return time.Time{}, fmt.Errorf("not within %s: %d of %d there", timeout, len(t.ok), t.need)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.allAt, nil
}

// trackers are the three views of an edit: the hub's status, every
// member's copy written with the new spec, and every member serving it.
type trackers struct{ hub, written, members *tracker }

func newTrackers(n int) trackers {
	return trackers{hub: newTracker(1), written: newTracker(n), members: newTracker(n)}
}

func (t trackers) reset(rev string) {
	t.hub.reset(rev)
	t.written.reset(rev)
	t.members.reset(rev)
}

// hubSays: the placement's status says n clusters Current with rev, and
// no other cluster but laggard (when not ""). During a halt the
// placement's revision is the hub's, and its clusters' the stable one.
func hubSays(p *fleetv1alpha1.FeatureFlagPlacement, rev string, n int, laggard string) bool {
	current := 0
	for _, c := range p.Status.Clusters {
		switch {
		case c.Cluster == laggard && laggard != "":
		case c.State != fleetv1alpha1.ClusterCurrent || c.Revision != rev:
			return false
		default:
			current++
		}
	}
	return current == n
}

// memberIs: a member's copy serves rev, Ready for its generation, as its
// own flagplane wrote.
func memberIs(ff *v1beta1.FeatureFlag, rev string) bool {
	if ff.Status.Revision != rev || ff.Status.ObservedGeneration != ff.Generation {
		return false
	}
	ready := meta.FindStatusCondition(ff.Status.Conditions, v1beta1.ConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == ff.Generation
}

// watchAll starts the bench's own caches (watches) of the hub's
// placement and of every member's copies, feeding hub and members.
func (f *fleet) watchAll(ctx context.Context, t trackers) error {
	watch := func(c cache.Cache, obj client.Object, fn func(obj any)) error {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: fn, UpdateFunc: func(_, o any) { fn(o) }})
		return err
	}
	n := len(f.clusters)
	hc, err := cache.New(f.env.Hub.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{teamA: {}}})
	if err != nil {
		return err
	}
	if err := watch(hc, &fleetv1alpha1.FeatureFlagPlacement{}, func(o any) {
		p := o.(*fleetv1alpha1.FeatureFlagPlacement)
		t.hub.see("hub", func(rev string) bool { return hubSays(p, rev, n, f.laggardName()) })
	}); err != nil {
		return err
	}
	f.hubCache = hc
	caches := []cache.Cache{hc}
	sim := len(f.members) == 1 && f.members[0].Name == "shared"
	for _, m := range f.members {
		opts := cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{teamA: {}}}
		if sim {
			opts.DefaultNamespaces = nil // every namespace of the shared member
		}
		mc, err := cache.New(m.Config, opts)
		if err != nil {
			return err
		}
		name := m.Name
		if err := watch(mc, &v1beta1.FeatureFlag{}, func(o any) {
			ff := o.(*v1beta1.FeatureFlag)
			key := name
			if sim {
				cluster, _, ok := nsfleet.Split(ff.Namespace)
				if !ok {
					return
				}
				key = cluster
			}
			if ff.Name == flagSetName {
				t.written.see(key, func(rev string) bool { return fleetwf.Revision(ff) == rev })
				t.members.see(key, func(rev string) bool { return memberIs(ff, rev) })
			}
		}); err != nil {
			return err
		}
		caches = append(caches, mc)
	}
	for _, c := range caches {
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("the bench's caches did not sync")
		}
	}
	return nil
}

// flagSet is the hub's FeatureFlag at edit i: each edit adds a variant
// of its own, so that every edit is a new revision.
func flagSet(i int) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name = teamA, flagSetName
	variants, _ := json.Marshal(map[string]bool{"on": true, "off": false, fmt.Sprintf("edit-%d", i): true})
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"new-checkout": {State: "ENABLED", Variants: variants, DefaultVariant: "off"}}
	return ff
}

// place creates the hub's FeatureFlag and its placement onto every
// member, and waits until both views say every member serves it.
func (f *fleet) place(ctx context.Context, t trackers, timeout time.Duration) (time.Duration, error) {
	ff := flagSet(0)
	t.reset(fleetwf.Revision(ff))
	began := time.Now()
	if err := f.hubC.Create(ctx, ff); err != nil {
		return 0, err
	}
	p := &fleetv1alpha1.FeatureFlagPlacement{ObjectMeta: metav1.ObjectMeta{Name: placementName, Namespace: teamA},
		Spec: fleetv1alpha1.FeatureFlagPlacementSpec{
			TargetRef:       fleetv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: "FeatureFlag", Name: flagSetName},
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{selectLabel: "true"}}}}
	if err := f.hubC.Create(ctx, p); err != nil {
		return 0, err
	}
	at, err := t.hub.wait(ctx, timeout)
	if err != nil {
		return 0, fmt.Errorf("the first placement, hub status: %w", err)
	}
	if _, err := t.members.wait(ctx, timeout); err != nil {
		return 0, fmt.Errorf("the first placement, members: %w", err)
	}
	return at.Sub(began), nil
}

// editResult is one edit's latencies: until the hub's status says every
// cluster Current, until every copy was written, and until every member
// serves it.
type editResult struct{ hub, written, members time.Duration }

// update gives the hub's FeatureFlag want's spec, and says when the
// Update that did it was sent.
func (f *fleet) update(ctx context.Context, want *v1beta1.FeatureFlag) (time.Time, error) {
	var began time.Time
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ff v1beta1.FeatureFlag
		if err := f.hubC.Get(ctx, client.ObjectKeyFromObject(want), &ff); err != nil {
			return err
		}
		ff.Spec = want.Spec
		began = time.Now()
		return f.hubC.Update(ctx, &ff)
	})
	return began, err
}

// edit makes edit i on the hub and waits for both views.
func (f *fleet) edit(ctx context.Context, i int, t trackers, timeout time.Duration) (editResult, error) {
	want := flagSet(i)
	t.reset(fleetwf.Revision(want))
	began, err := f.update(ctx, want)
	if err != nil {
		return editResult{}, err
	}
	hubAt, err := t.hub.wait(ctx, timeout)
	if err != nil {
		return editResult{}, fmt.Errorf("edit %d, hub status: %w", i, err)
	}
	writtenAt, err := t.written.wait(ctx, timeout)
	if err != nil {
		return editResult{}, fmt.Errorf("edit %d, copies written: %w", i, err)
	}
	memAt, err := t.members.wait(ctx, timeout)
	if err != nil {
		return editResult{}, fmt.Errorf("edit %d, members: %w", i, err)
	}
	return editResult{hub: hubAt.Sub(began), written: writtenAt.Sub(began), members: memAt.Sub(began)}, nil
}

// usage is what the hub process used over a phase.
type usage struct {
	cpu                 time.Duration
	length              time.Duration
	rss, heap           uint64 // at the end (heap after a collection)
	peakRSS, peakHeap   uint64 // sampled every 250 ms
	samples, sampleErrs int
}

// meter samples the hub process until stop is called.
func (f *fleet) meter() (stop func() usage) {
	began := time.Now()
	cpu0, _ := f.proc.cpu()
	var u usage
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			rss, err1 := f.proc.rss()
			heap, err2 := f.proc.heap(false)
			if err1 != nil || err2 != nil {
				u.sampleErrs++
			}
			u.peakRSS, u.peakHeap, u.samples = max(u.peakRSS, rss), max(u.peakHeap, heap), u.samples+1
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() usage {
		close(quit)
		<-done
		cpu1, _ := f.proc.cpu()
		u.cpu, u.length = cpu1-cpu0, time.Since(began)
		u.rss, _ = f.proc.rss()
		u.heap, _ = f.proc.heap(true)
		return u
	}
}

// percentile is the nearest-rank percentile of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
