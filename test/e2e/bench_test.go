package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/evaluation/v1/evaluationv1grpc"
	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	evaluationv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/evaluation/v1"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// The edit-to-served benchmark: how long after a FeatureFlag edit the
// injected flagd of a running pod serves the new value, per provider, on
// the suite's set-up (control plane, node, whole operator), and which part
// of that time is whose.
//
// Per provider, one Deployment whose pod runs on the node; then edits one
// at a time, each toggling the flag's default variant with a merge patch.
// Each stage is timed from the edit, and observed by an event rather than
// by polling (polling every millisecond took enough of the two cores to
// inflate what it measured):
//
//   - watched: a watch of the benchmark's has the edited FeatureFlag (the
//     API server's part, validating webhook included);
//   - configmap (file): a watch has the generated ConfigMap with it
//     (flagplane's part);
//   - projected (file): the flag file, as the flagd container sees it,
//     holds it, read on an inotify event of its mount directory (the
//     node's part);
//   - pushed (flagd-proxy): a subscriber of the benchmark's on the sync
//     server receives it (flagplane's part);
//   - served: flagd's event stream says its configuration changed and an
//     evaluation over its HTTP API returns the new variant (flagd's part).
//
// The kubernetes provider is the baseline of the same run: flagd watching
// the API server itself, with nothing of flagplane in the path. The next
// edit starts once flagplane's status of the FeatureFlag caught up, so
// that edits do not overlap flagplane's work on the one before.
//
//	go test ./test/e2e -run '^$' -bench EditToServed -benchtime 1x
//	FLAGPLANE_E2E_BENCH_EDITS=100 go test ./test/e2e -run '^$' -bench EditToServed -benchtime 1x
//
// startBenchWorld starts the suite's set-up for a benchmark, logging
// only with -v, and stops it when the benchmark ends.
func startBenchWorld(ctx context.Context, b *testing.B) *world {
	b.Helper()
	log := io.Discard
	if testing.Verbose() {
		log = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(log)))
	// client-go reports the benchmark's own watches ending at the close.
	klog.SetOutput(log)
	klog.LogToStderr(false)
	w, err := startWorld(ctx, log, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := w.stop(); err != nil {
			b.Error(err)
		}
	})
	return w
}

func BenchmarkEditToServed(b *testing.B) {
	ctx := context.Background()
	w := startBenchWorld(ctx, b)
	edits := benchEdits()
	results := map[v1beta1.SyncProviderType]*benchRun{}
	providers := []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy}
	for _, p := range providers {
		b.Run("provider="+string(p), func(b *testing.B) {
			r, err := newBenchRun(ctx, w, p)
			if err != nil {
				b.Fatal(err)
			}
			defer r.close()
			for range b.N {
				if err := r.edit(ctx); err != nil { // warm-up, not counted
					b.Fatal(r.explain(err))
				}
				r.stages = map[string][]time.Duration{}
				for range edits {
					if err := r.edit(ctx); err != nil {
						b.Fatal(r.explain(err))
					}
				}
			}
			for _, s := range r.stageNames() {
				b.ReportMetric(ms(percentile(r.stages[s], 0.50)), s+"-p50-ms")
				b.ReportMetric(ms(percentile(r.stages[s], 0.99)), s+"-p99-ms")
			}
			results[p] = r
		})
	}
	if len(results) == len(providers) {
		fmt.Println()
		fmt.Print(benchTable(results, providers, edits))
	}
}

// benchEditsEnv overrides the number of timed edits per provider.
const benchEditsEnv = "FLAGPLANE_E2E_BENCH_EDITS"

func benchEdits() int {
	if n, err := strconv.Atoi(os.Getenv(benchEditsEnv)); err == nil && n > 0 {
		return n
	}
	return 20
}

// Stage names, in the order they happen.
const (
	stageWritten   = "configmap" // file: the ConfigMap carries the edit
	stageProjected = "projected" // file: the container's file does
	stageWatched   = "watched"   // a watch of the FeatureFlag has it
	stagePushed    = "pushed"    // flagd-proxy: a sync-server subscriber has it
	stageServed    = "served"    // flagd answers with it
	benchSource    = "flags"     // the FeatureFlagSource
	benchFlagSet   = "checkout"  // the FeatureFlag
	benchApp       = "web"       // the Deployment
	benchTimeout   = 30 * time.Second
	benchSetupWait = 2 * time.Minute
)

// benchRun is one provider's pod and what watches the way to it.
type benchRun struct {
	w        *world
	provider v1beta1.SyncProviderType
	ns       string
	pod      types.NamespacedName
	addr     string
	variant  string
	stages   map[string][]time.Duration
	// seen records when a stage first showed each variant, after the edit
	// being timed (a watch or a subscriber writes it).
	mu      sync.Mutex
	since   time.Time
	seen    map[string]map[string]time.Time
	cancels []func()
}

func newBenchRun(ctx context.Context, w *world, p v1beta1.SyncProviderType) (*benchRun, error) {
	ns, err := w.cp.NewNamespace(ctx, "bench-"+strings.ReplaceAll(string(p), "-", ""))
	if err != nil {
		return nil, err
	}
	r := &benchRun{w: w, provider: p, ns: ns, variant: "off", stages: map[string][]time.Duration{}, seen: map[string]map[string]time.Time{}}
	c := w.cp.Client
	for _, o := range []client.Object{
		flagSet(ns, benchFlagSet, r.variant),
		fixtures.Source(ns, benchSource, []v1beta1.Source{{Source: benchFlagSet, Provider: p}}, fixtures.Targeting("Deployment", benchApp)),
		deployment(ns, benchApp, appImage, nil),
	} {
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, benchSetupWait, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": benchApp}); err != nil {
			return false, err
		}
		// The pod admitted with the injection (not one the healer replaces).
		pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		if len(pods.Items) != 1 || !podReady(&pods.Items[0]) || pods.Items[0].Annotations[restarts.AnnotationInjection] == "" {
			return false, nil
		}
		r.pod = types.NamespacedName{Namespace: ns, Name: pods.Items[0].Name}
		addr, ok := w.node.Addr(r.pod, injection.SidecarName, 8013)
		if !ok {
			return false, nil
		}
		r.addr = addr
		e, err := resolveOnce(addr)
		return err == nil && e == evaluated(r.variant), nil
	})
	if err != nil {
		return r, r.explain(fmt.Errorf("waiting for the %s provider's pod to serve the flag: %w", p, err))
	}
	if err := r.watchServed(ctx); err != nil {
		return r, err
	}
	err = r.watch(ctx, &v1beta1.FeatureFlagList{}, benchFlagSet, stageWatched, func(o client.Object) string {
		return o.(*v1beta1.FeatureFlag).Spec.FlagSpec.Flags[flagKey].DefaultVariant
	})
	if err != nil {
		return r, err
	}
	switch p {
	case v1beta1.SyncProviderFile:
		if err := r.watchProjected(); err != nil {
			return r, err
		}
		err = r.watch(ctx, &corev1.ConfigMapList{}, topology.ConfigMapName(topology.FlagSetKey(ns, benchFlagSet)), stageWritten, func(o client.Object) string {
			for _, v := range o.(*corev1.ConfigMap).Data {
				return variantIn(v)
			}
			return ""
		})
	case v1beta1.SyncProviderFlagdProxy:
		err = r.subscribe(ctx)
	}
	return r, err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// variantIn finds the default variant in a flag set's flagd JSON.
func variantIn(flagdJSON string) string {
	for _, v := range []string{"on", "off"} {
		if strings.Contains(flagdJSON, `"defaultVariant":"`+v+`"`) {
			return v
		}
	}
	return ""
}

// record notes that stage shows variant now.
func (r *benchRun) record(stage, variant string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since.IsZero() || now.Before(r.since) {
		return
	}
	if r.seen[stage] == nil {
		r.seen[stage] = map[string]time.Time{}
	}
	if _, ok := r.seen[stage][variant]; !ok {
		r.seen[stage][variant] = now
	}
}

// watch records stage whenever the object named name, of list's kind in
// the run's namespace, changes.
func (r *benchRun) watch(ctx context.Context, list client.ObjectList, name, stage string, variantOf func(client.Object) string) error {
	c, err := client.NewWithWatch(r.w.cp.Config, client.Options{Scheme: r.w.cp.Scheme})
	if err != nil {
		return err
	}
	wi, err := c.Watch(ctx, list, client.InNamespace(r.ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		return fmt.Errorf("watching %s: %w", name, err)
	}
	r.cancels = append(r.cancels, wi.Stop)
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if o, ok := ev.Object.(client.Object); ok {
				r.record(stage, variantOf(o))
			}
		}
	}()
	return nil
}

// subscribe holds a subscription of the benchmark's own to the flag set
// on the sync server, with the namespace's token, as the sidecar has.
func (r *benchRun) subscribe(ctx context.Context) error {
	headers, err := r.w.op.NamespaceTokens.HeadersFor(r.ns)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(r.w.op.SyncAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	r.cancels = append(r.cancels, func() { cancel(); _ = conn.Close() })
	md := metadata.New(headers)
	md.Set(syncserver.SelectorHeader, syncserver.Selector(topology.FlagSetKey(r.ns, benchFlagSet)))
	stream, err := syncv1grpc.NewFlagSyncServiceClient(conn).SyncFlags(metadata.NewOutgoingContext(sctx, md), &syncv1.SyncFlagsRequest{})
	if err != nil {
		return fmt.Errorf("subscribing to the sync server: %w", err)
	}
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			r.record(stagePushed, variantIn(msg.GetFlagConfiguration()))
		}
	}()
	return nil
}

// edit toggles the flag's default variant and waits until every stage of
// the provider has shown it; it records how long after the edit each did.
func (r *benchRun) edit(ctx context.Context) error {
	next := map[string]string{"on": "off", "off": "on"}[r.variant]
	patch := []byte(`{"spec":{"flagSpec":{"flags":{"` + flagKey + `":{"defaultVariant":"` + next + `"}}}}}`)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: benchFlagSet}}

	r.mu.Lock()
	r.seen = map[string]map[string]time.Time{}
	r.since = time.Now()
	began := r.since
	r.mu.Unlock()
	if err := r.w.cp.Client.Patch(ctx, ff, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("editing the FeatureFlag: %w", err)
	}
	// The observers record as events arrive; this only looks at what they
	// recorded, in memory.
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, benchTimeout, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		missing = missing[:0]
		for _, s := range r.stageNames() {
			if _, ok := r.seen[s][next]; !ok {
				missing = append(missing, s)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("edit to %q: %v never showed it: %w", next, missing, err)
	}
	r.mu.Lock()
	for _, s := range r.stageNames() {
		r.stages[s] = append(r.stages[s], r.seen[s][next].Sub(began))
	}
	r.since = time.Time{}
	r.mu.Unlock()
	r.variant = next
	// flagd may serve before flagplane is done with the edit (its status
	// write, for one): the next edit starts once it is, so that each is
	// timed from a quiet cluster rather than overlapping the last one.
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, benchTimeout, true, func(ctx context.Context) (bool, error) {
		if err := r.w.cp.Client.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return false, err
		}
		return ff.Status.ObservedGeneration == ff.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for flagplane's status of the edit to %q: %w", next, err)
	}
	return nil
}

// watchServed records stageServed when flagd serves a new value: on each
// configuration_change event of its event stream (sent once its store
// holds the change), an evaluation over its HTTP API says which.
func (r *benchRun) watchServed(ctx context.Context) error {
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	r.cancels = append(r.cancels, func() { cancel(); _ = conn.Close() })
	stream, err := evaluationv1grpc.NewServiceClient(conn).EventStream(sctx, &evaluationv1.EventStreamRequest{})
	if err != nil {
		return fmt.Errorf("subscribing to flagd's events: %w", err)
	}
	go func() {
		last := r.variant
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			if ev.GetType() != "configuration_change" {
				continue
			}
			// The event follows the store's update; should an evaluation
			// still show the old value, look again shortly.
			for range 100 {
				if e, err := resolveOnce(r.addr); err == nil && e.Variant != last {
					last = e.Variant
					r.record(stageServed, e.Variant)
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return nil
}

// watchProjected records stageProjected when the flag file, as the flagd
// container sees it, changes: an inotify watch of its mount directory
// (through the process's root), which the node's ..data swap renames into.
func (r *benchRun) watchProjected() error {
	pid, ok := r.w.node.PID(r.pod, injection.SidecarName)
	if !ok {
		return errors.New("flagd does not run")
	}
	f := topology.FlagSetKey(r.ns, benchFlagSet)
	dir := "/proc/" + strconv.Itoa(pid) + "/root" + injection.FlagMountDir(f)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	events := os.NewFile(uintptr(fd), "inotify")
	r.cancels = append(r.cancels, func() { _ = events.Close() })
	go func() {
		buf := make([]byte, 64*1024)
		for {
			if _, err := events.Read(buf); err != nil {
				return
			}
			if data, err := r.w.node.ReadFile(r.pod, injection.SidecarName, injection.FlagFilePath(f)); err == nil {
				r.record(stageProjected, variantIn(string(data)))
			}
		}
	}()
	return nil
}

// stageNames are the provider's stages, in order, served last.
func (r *benchRun) stageNames() []string {
	switch r.provider {
	case v1beta1.SyncProviderFile:
		return []string{stageWatched, stageWritten, stageProjected, stageServed}
	case v1beta1.SyncProviderFlagdProxy:
		return []string{stageWatched, stagePushed, stageServed}
	}
	return []string{stageWatched, stageServed}
}

// explain adds the node's container logs of the run's namespace to err.
func (r *benchRun) explain(err error) error {
	return fmt.Errorf("%w\ncontainer logs:\n%s", err, r.w.node.LogsOf(r.ns))
}

func (r *benchRun) close() {
	for _, c := range r.cancels {
		c()
	}
	_ = r.w.cp.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})
}

// benchTable renders the results: per provider, each stage's p50 and p99
// from the edit, and the part of the way each stage took (p50 of the
// per-edit differences), and served against the kubernetes baseline.
func benchTable(results map[v1beta1.SyncProviderType]*benchRun, providers []v1beta1.SyncProviderType, edits int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FeatureFlag edit to the running flagd serving the new value, %d edits per provider (times from the edit)\n\n", edits)
	fmt.Fprintf(&b, "| provider | stage | p50 ms | p99 ms | max ms | this stage alone, p50 ms |\n|---|---|--:|--:|--:|--:|\n")
	base := results[v1beta1.SyncProviderKubernetes].stages[stageServed]
	for _, p := range providers {
		r := results[p]
		var prev []time.Duration
		for _, s := range r.stageNames() {
			d := r.stages[s]
			part := d
			if prev != nil {
				part = make([]time.Duration, len(d))
				for i := range d {
					part[i] = d[i] - prev[i]
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.1f | %.1f |\n", p, s,
				ms(percentile(d, 0.5)), ms(percentile(d, 0.99)), ms(percentile(d, 1)), ms(percentile(part, 0.5)))
			prev = d
		}
	}
	fmt.Fprintf(&b, "\nserved, against the kubernetes provider (flagd's own watch, no flagplane in the path):\n")
	for _, p := range providers {
		d := results[p].stages[stageServed]
		fmt.Fprintf(&b, "  %-12s p50 %.2f×  p99 %.2f×\n", p, ms(percentile(d, 0.5))/ms(percentile(base, 0.5)), ms(percentile(d, 0.99))/ms(percentile(base, 0.99)))
	}
	return b.String()
}

// percentile of durations, p in [0, 1]: the element at (n-1)·p of the
// sorted durations, as the sync server's fan-out benchmark computes it.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
