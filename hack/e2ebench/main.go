// Command e2ebench measures flagplane end to end on a real control plane
// (etcd and kube-apiserver of test/controlplane), with the manager binary of
// cmd/manager running as a process of its own, and prints markdown tables:
//
//   - start-up: the manager started over 10,000 Deployments and 1,000 flag
//     sets (each read by a source that targets ten of them): first with
//     nothing generated yet, then restarted with everything in place;
//     from the process start to its caches synced and to Ready, what it
//     wrote, and its memory;
//
//   - edit: a FeatureFlag edit until its generated ConfigMap is updated, as
//     a watch of the ConfigMap sees it, when the flag set's source targets
//     10, 100, 1,000 and 10,000 Deployments; p50, p99 and max over the
//     edits, the API requests per edit, against a baseline measured in the
//     same run (a ConfigMap updated directly, seen by the same kind of
//     watch: one write and one watch delivery, where the edit takes two
//     of each and the manager's work in between).
//
//     go run ./hack/e2ebench [-edits 40] [-sizes 10,100,1000,10000]
//
// It runs no kube-controller-manager: nothing here needs a controller, and
// with one every Deployment would also get a ReplicaSet and a Pod (two more
// objects per workload that the manager's informers hold, and load on the
// same two cores), which the benchmark does not set out to measure.
// Progress goes to stderr, the tables to stdout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/metrics"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/managerproc"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Goals of the issue.
const (
	goalP99            = 50 * time.Millisecond
	goalP99Size        = 10000
	goalReadyAfterSync = 5 * time.Second
)

type options struct {
	sizes                                                []int
	edits                                                int
	startupNamespaces, startupWorkloads, startupFlagSets int
	parallel                                             int
	strict                                               bool
	// heapTop is how many entries of the manager's heap profile to print
	// after each start-up and at the end (0: none); profiles keeps the
	// profiles in a directory.
	heapTop  int
	profiles string
}

func main() {
	var o options
	sizes := flag.String("sizes", "10,100,1000,10000", "targeted workloads of the edited flag set")
	flag.IntVar(&o.edits, "edits", 100, "edits per size (and of the baseline); p99 is the nearest rank")
	flag.IntVar(&o.startupNamespaces, "startup-namespaces", 100, "namespaces of the start-up cluster")
	flag.IntVar(&o.startupWorkloads, "startup-workloads", 10000, "Deployments of the start-up cluster")
	flag.IntVar(&o.startupFlagSets, "startup-flagsets", 1000, "flag sets (and sources) of the start-up cluster")
	flag.IntVar(&o.parallel, "parallel", 16, "concurrent creates while setting up")
	flag.BoolVar(&o.strict, "strict", false, "exit with status 1 when a goal is missed")
	flag.IntVar(&o.heapTop, "heap-top", 12, "entries of the manager's heap profile (in use, by function) to print after each start-up and at the end; 0 takes no profile")
	flag.StringVar(&o.profiles, "profiles", "", "directory to keep the manager's heap profiles in (default: not kept)")
	flag.Parse()
	for s := range strings.SplitSeq(*sizes, ",") {
		if *sizes == "" || *sizes == "none" {
			break // start-up only
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-sizes: %q is not a size", s))
		}
		o.sizes = append(o.sizes, n)
	}
	ok, err := run(context.Background(), o, os.Stdout)
	if err != nil {
		fatal(err)
	}
	if !ok && o.strict {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "e2ebench:", err)
	os.Exit(2)
}

var began = time.Now()

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
}

type bench struct {
	o       options
	cp      *controlplane.ControlPlane
	c       client.Client
	cs      *kubernetes.Clientset
	ww      client.WithWatch
	binary  string
	dir     string
	manager *managerproc.Process
	starts  int
}

func run(ctx context.Context, o options, out io.Writer) (bool, error) {
	dir, err := os.MkdirTemp("", "flagplane-e2ebench-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	root, err := os.Getwd()
	if err != nil {
		return false, err
	}
	b := &bench{o: o, dir: dir}

	progress("starting the control plane (etcd, kube-apiserver; no kube-controller-manager) and building cmd/manager")
	built := make(chan error, 1)
	go func() {
		var err error
		b.binary, err = managerproc.Build(ctx, root, dir)
		built <- err
	}()
	b.cp, err = controlplane.Start(ctx, controlplane.Options{NoControllerManager: true, Log: io.Discard})
	if err != nil {
		return false, err
	}
	defer func() {
		if err := b.cp.Stop(); err != nil {
			progress("stopping the control plane: %v", err)
		}
	}()
	if err := <-built; err != nil {
		return false, err
	}
	cfg := rest.CopyConfig(b.cp.Config)
	cfg.QPS = -1 // no client-side rate limit: the API server's own limits apply
	if b.c, err = client.New(cfg, client.Options{Scheme: b.cp.Scheme}); err != nil {
		return false, err
	}
	if b.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return false, err
	}
	if b.ww, err = client.NewWithWatch(cfg, client.Options{Scheme: b.cp.Scheme}); err != nil {
		return false, err
	}

	startups, err := b.startup(ctx)
	if err != nil {
		return false, err
	}
	defer func() {
		if b.manager != nil {
			_ = b.manager.Stop()
		}
	}()
	var edits []editResult
	var baseline editResult
	if len(o.sizes) > 0 {
		if edits, baseline, err = b.editLatency(ctx); err != nil {
			return false, err
		}
	}
	final, err := b.memory(ctx)
	if err != nil {
		return false, err
	}
	return report(out, o, startups, edits, baseline, final), nil
}

// ---------------------------------------------------------------- set-up

func (b *bench) createAll(ctx context.Context, what string, objs []client.Object) error {
	start := time.Now()
	var done atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(b.o.parallel)
	for _, obj := range objs {
		g.Go(func() error {
			if err := b.c.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
			}
			if n := done.Add(1); n%2000 == 0 {
				progress("  %s: %d of %d", what, n, len(objs))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	d := time.Since(start)
	progress("created %d %s in %s (%.0f/s)", len(objs), what, d.Round(time.Millisecond), float64(len(objs))/d.Seconds())
	return nil
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			},
		},
	}
}

const counterFlag = "edit"

// flagSet has a boolean flag with targeting and the counter flag whose
// variant an edit sets.
func flagSet(ns, name string, n int) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"new-checkout": {State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off",
			Targeting: json.RawMessage(`{"if":[{"ends_with":[{"var":"email"},"@example.com"]},"on","off"]}`)},
		counterFlag: counter(n),
	}
	return ff
}

func counter(n int) v1beta1.Flag {
	return v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), DefaultVariant: "n"}
}

func counterIn(content string) int {
	var doc struct {
		Flags map[string]json.RawMessage `json:"flags"`
	}
	var f struct {
		Variants map[string]int `json:"variants"`
	}
	if json.Unmarshal([]byte(content), &doc) != nil || json.Unmarshal(doc.Flags[counterFlag], &f) != nil {
		return -1
	}
	if n, ok := f.Variants["n"]; ok {
		return n
	}
	return -1
}

func source(ns, name, flagSet string, selector map[string]string) *v1beta1.FeatureFlagSource {
	s := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	s.Spec.Sources = []v1beta1.Source{{Source: flagSet, Provider: v1beta1.SyncProviderFile}}
	s.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
	return s
}

// ---------------------------------------------------------------- start-up

type startup struct {
	name                    string
	workloads, flagSets     int
	configMapsBefore        int
	toSynced, syncedToReady time.Duration
	toReady                 time.Duration
	writes                  metrics.APIRequestCounts
	rss, peakRSS, heapInUse float64
	rssAnon, rssFile        float64
	heapTop                 string
}

func (b *bench) startup(ctx context.Context) ([]startup, error) {
	o := b.o
	perNS := o.startupWorkloads / o.startupNamespaces
	fsPerNS := o.startupFlagSets / o.startupNamespaces
	if perNS < 1 || fsPerNS < 1 {
		return nil, errors.New("the start-up cluster needs at least a workload and a flag set per namespace")
	}
	progress("start-up cluster: %d namespaces x (%d Deployments, %d flag sets, %d sources, each source selecting %d Deployments)",
		o.startupNamespaces, perNS, fsPerNS, fsPerNS, perNS/fsPerNS)
	var nss, deps, flags []client.Object
	for i := range o.startupNamespaces {
		ns := fmt.Sprintf("bench-s-%03d", i)
		nss = append(nss, namespace(ns))
		for j := range perNS {
			deps = append(deps, deployment(ns, fmt.Sprintf("web-%03d", j), map[string]string{"group": strconv.Itoa(j % fsPerNS)}))
		}
		for j := range fsPerNS {
			name := fmt.Sprintf("flags-%02d", j)
			flags = append(flags, flagSet(ns, name, 0), source(ns, name, name, map[string]string{"group": strconv.Itoa(j)}))
		}
	}
	if err := b.createAll(ctx, "namespaces", nss); err != nil {
		return nil, err
	}
	if err := b.createAll(ctx, "Deployments", deps); err != nil {
		return nil, err
	}
	if err := b.createAll(ctx, "flag sets and sources", flags); err != nil {
		return nil, err
	}

	var out []startup
	for _, name := range []string{"first start (nothing generated yet)", "restart (everything in place)"} {
		var cms corev1.ConfigMapList
		if err := b.c.List(ctx, &cms, client.MatchingLabels(workflows.ManagedLabels())); err != nil {
			return nil, err
		}
		if b.manager != nil {
			progress("stopping the manager")
			if err := b.manager.Stop(); err != nil {
				return nil, err
			}
		}
		progress("%s: starting the manager", name)
		s, err := b.startManager(ctx, name)
		if err != nil {
			return nil, err
		}
		s.workloads, s.flagSets, s.configMapsBefore = len(deps), o.startupFlagSets, len(cms.Items)
		out = append(out, s)
		progress("  caches synced %s after the process started, Ready %s after that; %d writes",
			s.toSynced.Round(time.Millisecond), s.syncedToReady.Round(time.Millisecond), s.writes.Writes())
	}
	return out, nil
}

func (b *bench) startManager(ctx context.Context, name string) (startup, error) {
	s := startup{name: name}
	p, err := managerproc.Start(managerproc.Options{
		Binary: b.binary, Name: fmt.Sprintf("manager-%d", time.Now().UnixNano()), Kubeconfig: b.cp.KubeconfigPath, Dir: b.dir,
		Args: []string{"--webhooks=false", "--profiling"},
	})
	if err != nil {
		return s, err
	}
	b.manager = p
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := p.WaitReady(waitCtx); err != nil {
		return s, err
	}
	s.toReady = time.Since(p.Started)
	logs, err := p.Logs()
	if err != nil {
		return s, err
	}
	var built, ready *managerproc.LogEntry
	for i, e := range logs {
		switch e.Msg {
		case "topology built from the caches":
			built = &logs[i]
		case "ready: every generated object reconciled once":
			ready = &logs[i]
		}
	}
	if built == nil || ready == nil {
		return s, fmt.Errorf("the manager did not log its start-up; last lines:\n%s", p.Tail(20))
	}
	// Both durations are measured by the manager from the start of its
	// workflows, which begin as the manager starts its runnables.
	dBuilt, err1 := time.ParseDuration(fmt.Sprint(built.Fields["duration"]))
	dReady, err2 := time.ParseDuration(fmt.Sprint(ready.Fields["duration"]))
	if err := errors.Join(err1, err2); err != nil {
		return s, fmt.Errorf("reading the start-up durations: %w", err)
	}
	s.syncedToReady = dReady - dBuilt
	s.toSynced = built.Time.Sub(p.Started)
	if err := b.settle(ctx); err != nil {
		return s, err
	}
	// Memory is read once the manager has returned its start-up's garbage
	// to the system (it logs so after the start-up pass).
	if err := waitForLog(ctx, p, "start-up memory returned to the system"); err != nil {
		return s, err
	}
	m, err := p.Metrics()
	if err != nil {
		return s, err
	}
	s.writes = apiRequests(m)
	s.heapInUse = managerproc.Sum(m, "go_memstats_heap_inuse_bytes", nil)
	var parts []string
	for _, name := range []string{"heap_inuse", "heap_idle", "heap_released", "stack_inuse", "gc_sys", "other_sys", "mspan_inuse", "sys"} {
		parts = append(parts, fmt.Sprintf("%s %s", name, mib(managerproc.Sum(m, "go_memstats_"+name+"_bytes", nil))))
	}
	progress("  Go memory: %s", strings.Join(parts, ", "))
	rss, peak, err := p.RSS()
	if err != nil {
		return s, err
	}
	s.rss, s.peakRSS = float64(rss), float64(peak)
	// Anonymous memory (the Go heap, stacks, the runtime's own) and
	// file-backed pages (mostly the binary's), which the kernel can drop.
	status, err := p.MemoryStatus()
	if err != nil {
		return s, err
	}
	s.rssAnon, s.rssFile = float64(status["RssAnon"]), float64(status["RssFile"])
	s.heapTop, err = b.heapTop(ctx, "startup-"+strconv.Itoa(b.starts))
	b.starts++
	return s, err
}

// waitForLog waits until the manager has logged msg.
func waitForLog(ctx context.Context, p *managerproc.Process, msg string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		logs, err := p.Logs()
		if err != nil {
			return err
		}
		for _, e := range logs {
			if e.Msg == msg {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager never logged %q; last lines:\n%s", msg, p.Tail(20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settle waits until the manager has nothing left to do: no key waits, is
// reconciled or waits for a retry (flagplane_pending_keys).
func (b *bench) settle(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		m, err := b.manager.Metrics()
		if err != nil {
			return err
		}
		if _, ok := m["flagplane_pending_keys"]; ok && managerproc.Sum(m, "flagplane_pending_keys", nil) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the manager's queues never emptied")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// apiRequests reads flagplane_api_requests_total from a scrape.
func apiRequests(families map[string]*dto.MetricFamily) metrics.APIRequestCounts {
	out := metrics.APIRequestCounts{}
	f, ok := families["flagplane_api_requests_total"]
	if !ok {
		return out
	}
	for _, m := range f.GetMetric() {
		var r metrics.APIRequest
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				r.Verb = l.GetValue()
			case "resource":
				r.Resource = l.GetValue()
			case "code":
				r.Code, _ = strconv.Atoi(l.GetValue())
			}
		}
		out[r] += int(m.GetCounter().GetValue())
	}
	return out
}

// ---------------------------------------------------------------- edits

type editResult struct {
	size int
	// load is the machine's load average over a minute when it began.
	load     string
	samples  []time.Duration
	requests metrics.APIRequestCounts
	// phases of each edit, from just before its write: the API server
	// acknowledged the write; a watch of the FeatureFlag (as the
	// manager's informer has) delivered it.
	acked, delivered []time.Duration
	// cpu is the manager's CPU time over the edits and their settling.
	cpu time.Duration
}

func (b *bench) editLatency(ctx context.Context) ([]editResult, editResult, error) {
	var objs []client.Object
	total := 0
	for _, n := range b.o.sizes {
		ns := fmt.Sprintf("bench-e-%d", n)
		if err := b.c.Create(ctx, namespace(ns)); err != nil {
			return nil, editResult{}, err
		}
		for j := range n {
			objs = append(objs, deployment(ns, fmt.Sprintf("web-%05d", j), map[string]string{"role": "target"}))
		}
		total += n
	}
	progress("edit cluster: %d more Deployments in %d namespaces, created with the manager running", total, len(b.o.sizes))
	if err := b.createAll(ctx, "Deployments", objs); err != nil {
		return nil, editResult{}, err
	}
	objs = nil
	for _, n := range b.o.sizes {
		ns := fmt.Sprintf("bench-e-%d", n)
		objs = append(objs, flagSet(ns, "flags", 0), source(ns, "flags", "flags", map[string]string{"role": "target"}))
	}
	if err := b.createAll(ctx, "flag sets and sources", objs); err != nil {
		return nil, editResult{}, err
	}
	for _, n := range b.o.sizes {
		if err := b.waitProgrammed(ctx, fmt.Sprintf("bench-e-%d", n), n); err != nil {
			return nil, editResult{}, err
		}
	}
	if err := b.settle(ctx); err != nil {
		return nil, editResult{}, err
	}

	progress("baseline: %d ConfigMap updates seen by a watch, no manager involved", b.o.edits)
	baseline, err := b.measure(ctx, fmt.Sprintf("bench-e-%d", b.o.sizes[0]), true)
	if err != nil {
		return nil, editResult{}, err
	}
	var results []editResult
	for _, n := range b.o.sizes {
		progress("edits with %d targeted workloads", n)
		load := loadAverage()
		r, err := b.measure(ctx, fmt.Sprintf("bench-e-%d", n), false)
		if err != nil {
			return nil, editResult{}, err
		}
		r.size, r.load = n, load
		results = append(results, r)
		progress("  p50 %s p99 %s", percentile(r.samples, 50).Round(10*time.Microsecond), percentile(r.samples, 99).Round(10*time.Microsecond))
		for _, i := range slowest(r.samples, 3) {
			progress("  edit %d: FeatureFlag write acknowledged after %s ms, delivered by a watch after %s ms, its ConfigMap seen after %s ms",
				i+1, ms(r.acked[i]), ms(r.delivered[i]), ms(r.samples[i]))
		}
	}
	return results, baseline, nil
}

// waitProgrammed waits until the source of ns targets n workloads and says
// Programmed, and its ConfigMap exists.
func (b *bench) waitProgrammed(ctx context.Context, ns string, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		src := &v1beta1.FeatureFlagSource{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags"}, src); err != nil {
			return err
		}
		c := meta.FindStatusCondition(src.Status.Conditions, v1beta1.ConditionProgrammed)
		if int(src.Status.TargetCount) == n && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == src.Generation {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("source %s/flags never became Programmed for %d workloads (targets %d, %v)", ns, n, src.Status.TargetCount, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measure makes b.o.edits edits one at a time, each timed from just before
// its write until a watch of the ConfigMap delivers the new content, and
// waits for the manager to settle between them. direct edits a ConfigMap
// of its own instead of the FeatureFlag: the baseline.
func (b *bench) measure(ctx context.Context, ns string, direct bool) (editResult, error) {
	var r editResult
	cmName := topology.ConfigMapName(topology.FlagSetKey(ns, "flags"))
	dataKey := topology.ConfigMapDataKey(topology.FlagSetKey(ns, "flags"))
	if direct {
		cmName, dataKey = "bench-baseline", "flags.json"
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}, Data: map[string]string{dataKey: contentWith(0)}}
		if err := b.c.Create(ctx, cm); err != nil {
			return r, err
		}
	}
	cm, err := b.cs.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	w, err := b.cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + cmName, ResourceVersion: cm.ResourceVersion})
	if err != nil {
		return r, err
	}
	defer w.Stop()
	var ffWatch watch.Interface
	if !direct {
		ff := &v1beta1.FeatureFlag{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags"}, ff); err != nil {
			return r, err
		}
		if ffWatch, err = b.ww.Watch(ctx, &v1beta1.FeatureFlagList{}, client.InNamespace(ns),
			client.MatchingFields{"metadata.name": "flags"}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: ff.ResourceVersion}}); err != nil {
			return r, err
		}
		defer ffWatch.Stop()
	}
	m, err := b.manager.Metrics()
	if err != nil {
		return r, err
	}
	before := apiRequests(m)
	cpuBefore := managerproc.Sum(m, "process_cpu_seconds_total", nil)
	for i := 1; i <= b.o.edits; i++ {
		var write func() error
		if direct {
			cm, err := b.cs.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				return r, err
			}
			cm.Data[dataKey] = contentWith(i)
			write = func() error {
				_, err := b.cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
				return err
			}
		} else {
			ff := &v1beta1.FeatureFlag{}
			if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags"}, ff); err != nil {
				return r, err
			}
			ff.Spec.FlagSpec.Flags[counterFlag] = counter(i)
			write = func() error { return b.c.Update(ctx, ff) }
		}
		start := time.Now()
		if err := write(); err != nil {
			return r, fmt.Errorf("edit %d: %w", i, err)
		}
		r.acked = append(r.acked, time.Since(start))
		delivered := make(chan time.Duration, 1)
		if !direct {
			go func() { delivered <- waitForFlagSet(ffWatch, i, start) }()
		}
		if err := waitFor(ctx, w, dataKey, i); err != nil {
			return r, fmt.Errorf("edit %d: %w", i, err)
		}
		r.samples = append(r.samples, time.Since(start))
		if !direct {
			d := <-delivered
			if d < 0 {
				return r, fmt.Errorf("edit %d: the watch of the FeatureFlag did not deliver it", i)
			}
			r.delivered = append(r.delivered, d)
			if err := b.waitObserved(ctx, ns); err != nil {
				return r, err
			}
		}
		if err := b.settle(ctx); err != nil {
			return r, err
		}
	}
	if m, err = b.manager.Metrics(); err != nil {
		return r, err
	}
	r.requests = apiRequests(m).Sub(before)
	r.cpu = time.Duration((managerproc.Sum(m, "process_cpu_seconds_total", nil) - cpuBefore) * float64(time.Second))
	return r, nil
}

// loadAverage is the first field of /proc/loadavg, "?" elsewhere.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func contentWith(n int) string {
	return `{"flags":{"` + counterFlag + `":{"state":"ENABLED","variants":{"n":` + strconv.Itoa(n) + `},"defaultVariant":"n"}}}`
}

func waitFor(ctx context.Context, w watch.Interface, dataKey string, n int) error {
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the watch ended")
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Modified && counterIn(cm.Data[dataKey]) == n {
				return nil
			}
		case <-timeout:
			return errors.New("the ConfigMap was not updated within a minute")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitForFlagSet returns how long after start the watch delivered edit n
// of the FeatureFlag; -1 when it ended first or took a minute.
func waitForFlagSet(w watch.Interface, n int, start time.Time) time.Duration {
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return -1
			}
			if ff, ok := ev.Object.(*v1beta1.FeatureFlag); ok && ev.Type == watch.Modified {
				var f struct {
					Variants map[string]int `json:"variants"`
				}
				if json.Unmarshal(ff.Spec.FlagSpec.Flags[counterFlag].Variants, &f.Variants) == nil && f.Variants["n"] == n {
					return time.Since(start)
				}
			}
		case <-timeout:
			return -1
		}
	}
}

// waitObserved waits until the FeatureFlag's status is about its generation.
func (b *bench) waitObserved(ctx context.Context, ns string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ff := &v1beta1.FeatureFlag{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags"}, ff); err != nil {
			return err
		}
		if ff.Status.ObservedGeneration == ff.Generation {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("FeatureFlag %s/flags: status never observed generation %d", ns, ff.Generation)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowest returns the indexes of the n largest samples, largest first.
func slowest(samples []time.Duration, n int) []int {
	idx := make([]int, len(samples))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return samples[idx[a]] > samples[idx[b]] })
	return idx[:min(n, len(idx))]
}

func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	// nearest rank
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// ---------------------------------------------------------------- memory

type memory struct {
	rss, peakRSS, heapInUse float64
	heapTop                 string
}

func (b *bench) memory(ctx context.Context) (memory, error) {
	m, err := b.manager.Metrics()
	if err != nil {
		return memory{}, err
	}
	rss, peak, err := b.manager.RSS()
	if err != nil {
		return memory{}, err
	}
	top, err := b.heapTop(ctx, "final")
	return memory{rss: float64(rss), peakRSS: float64(peak), heapInUse: managerproc.Sum(m, "go_memstats_heap_inuse_bytes", nil), heapTop: top}, err
}

// heapTop takes the manager's heap profile (its /debug/pprof/heap, served
// with --profiling) and returns the top entries of what is in use, by
// function, as go tool pprof prints them.
func (b *bench) heapTop(ctx context.Context, name string) (string, error) {
	if b.o.heapTop <= 0 {
		return "", nil
	}
	dir := b.o.profiles
	if dir == "" {
		dir = b.dir
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.manager.MetricsURL()+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("taking the manager's heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("taking the manager's heap profile: %s", resp.Status)
	}
	path := filepath.Join(dir, "heap-"+name+".pb.gz")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount="+strconv.Itoa(b.o.heapTop), b.binary, path)
	top, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("reading the heap profile %s: %w", path, err)
	}
	// Generic functions' names spell out their type arguments: cut long lines.
	var b2 strings.Builder
	for line := range strings.Lines(string(top)) {
		line = strings.TrimRight(line, "\n")
		if len(line) > 160 {
			line = line[:160] + "…"
		}
		b2.WriteString(line + "\n")
	}
	return b2.String(), nil
}

// ---------------------------------------------------------------- report

// heapProfile prints the top of a heap profile under a heading.
func heapProfile(out io.Writer, name, top string) {
	if top == "" {
		return
	}
	fmt.Fprintf(out, "\n### Heap in use, %s\n\n```\n%s```\n", name, top)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}

func mib(b float64) string { return strconv.FormatFloat(b/(1<<20), 'f', 0, 64) + " MiB" }

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func perEdit(c metrics.APIRequestCounts, edits int, match func(metrics.APIRequest) bool) string {
	return strconv.FormatFloat(float64(c.Count(match))/float64(edits), 'f', 2, 64)
}

func report(out io.Writer, o options, startups []startup, edits []editResult, baseline editResult, final memory) bool {
	ok := true
	if len(edits) > 0 {
		ok = reportEdits(out, o, edits, baseline)
	}
	return reportStartup(out, o, startups, final) && ok
}

func reportEdits(out io.Writer, o options, edits []editResult, baseline editResult) bool {
	ok := true
	fmt.Fprintf(out, "## Edit → generated ConfigMap, end to end\n\n")
	fmt.Fprintf(out, "%d edits per size, one at a time. Baseline: a ConfigMap updated directly, seen by the same kind of watch (p50 %s ms, p90 %s ms, p99 %s ms).\n\n",
		o.edits, ms(percentile(baseline.samples, 50)), ms(percentile(baseline.samples, 90)), ms(percentile(baseline.samples, 99)))
	fmt.Fprintln(out, "| targeted workloads | p50 ms | p90 ms | p99 ms | max ms | p50 × smallest size | p99 ÷ baseline p99 | FeatureFlag write acknowledged, p50 ms | FeatureFlag delivered by a watch, p50 ms | delivered → ConfigMap seen, p50 / p99 ms | manager CPU per edit | API writes per edit: ConfigMaps + status + other | reads per edit | machine load (1 min) |")
	fmt.Fprintln(out, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	var smallest time.Duration
	var p99AtGoal time.Duration
	baseP99 := percentile(baseline.samples, 99)
	for i, r := range edits {
		p50, p99, mx := percentile(r.samples, 50), percentile(r.samples, 99), percentile(r.samples, 100)
		if i == 0 {
			smallest = p50
		}
		if r.size == goalP99Size {
			p99AtGoal = p99
		}
		var manager []time.Duration
		for j := range r.samples {
			manager = append(manager, r.samples[j]-r.delivered[j])
		}
		cms := func(q metrics.APIRequest) bool { return q.Write() && q.Resource == "configmaps" }
		status := func(q metrics.APIRequest) bool { return q.Write() && strings.HasSuffix(q.Resource, "/status") }
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %.2f× | %.1f× | %s | %s | %s / %s | %s ms | %s + %s + %s | %s | %s |\n",
			thousands(r.size), ms(p50), ms(percentile(r.samples, 90)), ms(p99), ms(mx), float64(p50)/float64(smallest), float64(p99)/float64(baseP99),
			ms(percentile(r.acked, 50)), ms(percentile(r.delivered, 50)), ms(percentile(manager, 50)), ms(percentile(manager, 99)), ms(r.cpu/time.Duration(o.edits)),
			perEdit(r.requests, o.edits, cms), perEdit(r.requests, o.edits, status),
			perEdit(r.requests, o.edits, func(q metrics.APIRequest) bool { return q.Write() && !cms(q) && !status(q) }),
			perEdit(r.requests, o.edits, metrics.APIRequest.Read), r.load)
	}
	fmt.Fprintln(out)
	if p99AtGoal > 0 {
		verdict := "met"
		if p99AtGoal >= goalP99 {
			verdict, ok = "**missed**", false
		}
		fmt.Fprintf(out, "- Goal p99 under %s at %s targeted workloads: %s (%s ms).\n\n", goalP99, thousands(goalP99Size), verdict, ms(p99AtGoal))
	}

	return ok
}

func reportStartup(out io.Writer, o options, startups []startup, final memory) bool {
	ok := true
	fmt.Fprintf(out, "## Start-up\n\n")
	fmt.Fprintln(out, "| start | workloads | flag sets | generated ConfigMaps before | process start → caches synced | caches synced → Ready | process start → Ready | API writes until settled | RSS at Ready | of it anonymous / file-backed | peak RSS | Go heap in use |")
	fmt.Fprintln(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range startups {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s ms | %s ms | %s ms | %s | %s | %s / %s | %s | %s |\n",
			s.name, thousands(s.workloads), thousands(s.flagSets), thousands(s.configMapsBefore),
			ms(s.toSynced), ms(s.syncedToReady), ms(s.toReady), thousands(s.writes.Writes()), mib(s.rss), mib(s.rssAnon), mib(s.rssFile), mib(s.peakRSS), mib(s.heapInUse))
	}
	fmt.Fprintln(out)
	for _, s := range startups {
		verdict := "met"
		if s.syncedToReady >= goalReadyAfterSync {
			verdict, ok = "**missed**", false
		}
		fmt.Fprintf(out, "- Goal Ready within %s after the caches sync, %s: %s (%s ms).\n", goalReadyAfterSync, s.name, verdict, ms(s.syncedToReady))
	}
	total := o.startupWorkloads
	for _, n := range o.sizes {
		total += n
	}
	fmt.Fprintf(out, "- The manager after the edits, holding %s Deployments: RSS %s (peak %s), Go heap in use %s.\n",
		thousands(total), mib(final.rss), mib(final.peakRSS), mib(final.heapInUse))
	for _, s := range startups {
		heapProfile(out, s.name, s.heapTop)
	}
	heapProfile(out, fmt.Sprintf("holding %s Deployments", thousands(total)), final.heapTop)
	return ok
}
