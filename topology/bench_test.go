package topology

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// Benchmarks of the cost of one informer event against the size of the
// graph, and against what a controller that rebuilds a policy-machinery
// topology on every event pays for the same event.
//
//	BenchmarkIncremental/nodes=<n>/<event>  the event applied to the topology
//	BenchmarkRebuild/nodes=<n>/<event>      the event applied to the object
//	                                        store, then a full rebuild
//	BenchmarkBuild/nodes=<n>                building the topology from scratch;
//	                                        reports the heap it keeps per node
//
// Sizes are the outer loop and only one size's cluster is kept at a time,
// so that a small cluster is measured with a small heap, as it would run.
//
// An incremental op is eventsPerOp events on objects drawn across the whole
// cluster (so that caches do not flatter the large sizes); divide ns/op and
// B/op by the events/op metric. hack/benchtable does, and prints the table.

var (
	benchSizesFlag   = flag.String("bench-sizes", "1000,10000,100000", "cluster sizes (object nodes) of the topology benchmarks")
	rebuildMaxNodes  = flag.Int("bench-rebuild-max-nodes", 10000, "largest cluster on which BenchmarkRebuild runs (a policy-machinery rebuild is quadratic: at 100k nodes one takes minutes)")
	rebuildDAGChecks = flag.Bool("bench-rebuild-dag-check", false, "let the rebuild check the graph for cycles, as machinery.NewTopology does by default (quadratic in the edges)")
)

const eventsPerOp = 256

func benchSizes(tb testing.TB) []int {
	var out []int
	for _, f := range strings.Split(*benchSizesFlag, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			tb.Fatalf("-bench-sizes: %v", err)
		}
		out = append(out, n)
	}
	return out
}

// sink receives events: the topology, or the object store of a rebuild.
type sink interface {
	upsertFlagSet(*v1beta1.FeatureFlag)
	deleteFlagSet(Key)
	upsertSource(*v1beta1.FeatureFlagSource)
	deleteSource(Key)
	upsertWorkload(Workload)
	deleteWorkload(Key)
	upsertGrant(Grant)
}

// topologySink applies events to a topology, and takes a Snapshot after
// each, as a controller whose workflows read after every event would: so
// every event pays for copying what it changes, at every size.
type topologySink struct {
	tb testing.TB
	t  *Topology
}

func (s topologySink) check(_ Delta, err error) {
	if err != nil {
		s.tb.Fatal(err)
	}
	s.t.Snapshot()
}
func (s topologySink) upsertFlagSet(f *v1beta1.FeatureFlag)      { s.check(s.t.UpsertFlagSet(f)) }
func (s topologySink) deleteFlagSet(k Key)                       { s.check(s.t.DeleteFlagSet(k.Namespace, k.Name), nil) }
func (s topologySink) upsertSource(x *v1beta1.FeatureFlagSource) { s.check(s.t.UpsertSource(x)) }
func (s topologySink) deleteSource(k Key)                        { s.check(s.t.DeleteSource(k.Namespace, k.Name), nil) }
func (s topologySink) upsertWorkload(w Workload)                 { s.check(s.t.UpsertWorkload(w)) }
func (s topologySink) deleteWorkload(k Key)                      { s.check(s.t.DeleteWorkload(k), nil) }
func (s topologySink) upsertGrant(g Grant)                       { s.check(s.t.UpsertGrant(g)) }

type worldSink struct{ w *world }

func (s worldSink) upsertFlagSet(f *v1beta1.FeatureFlag) {
	s.w.flagSets[FlagSetKey(f.Namespace, f.Name)] = f
}
func (s worldSink) deleteFlagSet(k Key) { delete(s.w.flagSets, k) }
func (s worldSink) upsertSource(x *v1beta1.FeatureFlagSource) {
	s.w.sources[SourceKey(x.Namespace, x.Name)] = x
}
func (s worldSink) deleteSource(k Key)        { delete(s.w.sources, k) }
func (s worldSink) upsertWorkload(w Workload) { s.w.workloads[w.Key()] = w }
func (s worldSink) deleteWorkload(k Key)      { delete(s.w.workloads, k) }
func (s worldSink) upsertGrant(g Grant)       { s.w.grants[g.Key()] = g }

// benchEvent is one kind of informer event. Timed is the event; before and
// after (untimed) set up and undo what it needs. A symmetric event has no
// before or after: its undo is the same kind of event, timed too. Each
// builds its objects first and returns the action, so that building objects
// is not timed.
type benchEvent struct {
	name string
	// perWorkload events act on workloads, the others on a source and its
	// flag set and grant.
	perWorkload bool
	// modes restricts the objects picked to sources (and their workloads)
	// that target in one of these ways; none means any.
	modes                      []int
	before, timed, after, undo func(benchPick) func(sink)
}

func upsertFlagSet(f *v1beta1.FeatureFlag) func(sink) { return func(s sink) { s.upsertFlagSet(f) } }
func deleteFlagSet(k Key) func(sink)                  { return func(s sink) { s.deleteFlagSet(k) } }
func upsertSource(x *v1beta1.FeatureFlagSource) func(sink) {
	return func(s sink) { s.upsertSource(x) }
}
func deleteSource(k Key) func(sink)        { return func(s sink) { s.deleteSource(k) } }
func upsertWorkload(w Workload) func(sink) { return func(s sink) { s.upsertWorkload(w) } }
func deleteWorkload(k Key) func(sink)      { return func(s sink) { s.deleteWorkload(k) } }
func upsertGrant(g Grant) func(sink)       { return func(s sink) { s.upsertGrant(g) } }

// extraName names the object an event creates for a pick, distinct per pick.
func extraName(p benchPick) string { return fmt.Sprintf("extra-%d-%d", p.i, p.j) }

func flagSetOf(p benchPick) Key { return FlagSetKey(benchNs(p.nsi), fmt.Sprintf("flags-%d", p.i)) }

var benchEvents = []benchEvent{
	{
		name:  "flag-set-spec-edit",
		timed: func(p benchPick) func(sink) { return upsertFlagSet(benchFlagSet(p.nsi, p.i, "off")) },
		undo:  func(p benchPick) func(sink) { return upsertFlagSet(benchFlagSet(p.nsi, p.i, "on")) },
	},
	{
		name:  "flag-set-delete",
		timed: func(p benchPick) func(sink) { return deleteFlagSet(flagSetOf(p)) },
		after: func(p benchPick) func(sink) { return upsertFlagSet(benchFlagSet(p.nsi, p.i, "on")) },
	},
	{
		name:   "flag-set-create",
		before: func(p benchPick) func(sink) { return deleteFlagSet(flagSetOf(p)) },
		timed:  func(p benchPick) func(sink) { return upsertFlagSet(benchFlagSet(p.nsi, p.i, "on")) },
	},
	{
		name: "source-create",
		timed: func(p benchPick) func(sink) {
			return upsertSource(benchSource(p.nsi, p.i, benchSourceOpts{name: extraName(p)}))
		},
		after: func(p benchPick) func(sink) { return deleteSource(SourceKey(benchNs(p.nsi), extraName(p))) },
	},
	{
		name: "source-delete",
		timed: func(p benchPick) func(sink) {
			return deleteSource(SourceKey(benchNs(p.nsi), fmt.Sprintf("src-%d", p.i)))
		},
		after: func(p benchPick) func(sink) { return upsertSource(benchSource(p.nsi, p.i, benchSourceOpts{})) },
	},
	{
		name: "source-sidecar-edit",
		timed: func(p benchPick) func(sink) {
			return upsertSource(benchSource(p.nsi, p.i, benchSourceOpts{debug: true}))
		},
		undo: func(p benchPick) func(sink) { return upsertSource(benchSource(p.nsi, p.i, benchSourceOpts{})) },
	},
	{
		name:  "source-retarget",
		modes: []int{bySelector, byTargetRefs},
		timed: func(p benchPick) func(sink) {
			return upsertSource(benchSource(p.nsi, p.i, benchSourceOpts{narrow: true}))
		},
		undo: func(p benchPick) func(sink) { return upsertSource(benchSource(p.nsi, p.i, benchSourceOpts{})) },
	},
	{
		name:        "workload-create",
		perWorkload: true,
		modes:       []int{bySelector},
		timed: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{name: extraName(p)}))
		},
		after: func(p benchPick) func(sink) {
			return deleteWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{name: extraName(p)}).Key())
		},
	},
	{
		name:        "workload-delete",
		perWorkload: true,
		timed: func(p benchPick) func(sink) {
			return deleteWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{}).Key())
		},
		after: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{}))
		},
	},
	{
		name:        "workload-label-change",
		perWorkload: true,
		modes:       []int{bySelector},
		timed: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{unassigned: true}))
		},
		undo: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{}))
		},
	},
	{
		name:        "workload-irrelevant-label",
		perWorkload: true,
		timed: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{revision: "b"}))
		},
		undo: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{}))
		},
	},
	{
		name:        "workload-opt-out",
		perWorkload: true,
		modes:       []int{byAnnotation},
		timed: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{optOut: true}))
		},
		undo: func(p benchPick) func(sink) {
			return upsertWorkload(benchWorkload(p.nsi, p.i, p.j, benchWorkloadOpts{}))
		},
	},
	{
		name:  "grant-change",
		modes: []int{withCrossRef},
		timed: func(p benchPick) func(sink) { return upsertGrant(benchGrant(p.nsi, p.i, false)) },
		undo:  func(p benchPick) func(sink) { return upsertGrant(benchGrant(p.nsi, p.i, true)) },
	},
}

// benchActions are the prepared actions of one event on one object.
type benchActions struct{ before, timed, after, undo func(sink) }

func (ev benchEvent) prepare(picks []benchPick) []benchActions {
	build := func(f func(benchPick) func(sink), p benchPick) func(sink) {
		if f == nil {
			return nil
		}
		return f(p)
	}
	out := make([]benchActions, len(picks))
	for i, p := range picks {
		out[i] = benchActions{before: build(ev.before, p), timed: build(ev.timed, p), after: build(ev.after, p), undo: build(ev.undo, p)}
	}
	return out
}

// benchPicks is how many objects an event benchmark cycles through.
const benchPicks = 2048

// BenchmarkIncremental measures events applied to the topology
// (benchEventOn).
func BenchmarkIncremental(b *testing.B) {
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for _, ev := range benchEvents {
				b.Run(ev.name, func(b *testing.B) {
					c := clusterOf(b, n)
					benchEventOn(b, c, c.top.fork(), ev)
				})
			}
		})
	}
}

// stagedPolicies is how many rollout policies BenchmarkIncrementalStaged
// adds, one on a flag set of each of as many namespaces.
const stagedPolicies = 10

// BenchmarkIncrementalStaged measures the events of BenchmarkIncremental
// on the same cluster with stagedPolicies rollout policies, whose plans
// every edit computes again (updatePlans): compare its ns/event with
// BenchmarkIncremental's in the same run.
func BenchmarkIncrementalStaged(b *testing.B) {
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := clusterOf(b, n)
			staged := c.top.fork()
			for nsi := range min(stagedPolicies, benchNamespaces) {
				ff := benchFlagSet(nsi, 0, "on")
				p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ff.Namespace, Name: "staged"}}
				p.Spec.TargetRef = deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: ff.Name}
				p.Spec.Steps = []deliveryv1alpha1.RolloutStep{{Percentage: ptr.To[int32](50)}, {Percentage: ptr.To[int32](100)}}
				if _, err := staged.UpsertRolloutPolicy(p); err != nil {
					b.Fatal(err)
				}
			}
			for _, ev := range benchEvents {
				b.Run(ev.name, func(b *testing.B) {
					benchEventOn(b, c, staged.fork(), ev)
				})
			}
		})
	}
}

// benchEventOn times ev on top, a fork of c's topology.
//
// A symmetric event is applied and undone, both timed. Any other event is
// applied to a batch of distinct objects, timed, with the setup and undo of
// the whole batch untimed, so that stopping the timer (which reads memory
// statistics) does not come between events.
func benchEventOn(b *testing.B, c *benchCluster, top *Topology, ev benchEvent) {
	s := topologySink{tb: b, t: top}
	actions := ev.prepare(c.picks(benchPicks, ev.perWorkload, ev.modes))
	batch := min(eventsPerOp, len(actions))
	if ev.undo != nil {
		batch = eventsPerOp
	}
	b.ReportAllocs()
	b.ResetTimer()
	next := 0
	for range b.N {
		if ev.undo != nil {
			for e := 0; e < batch; e += 2 {
				a := actions[next%len(actions)]
				next++
				a.timed(s)
				a.undo(s)
			}
			continue
		}
		// A window of at most len(actions) holds each object once.
		window := make([]benchActions, batch)
		for e := range window {
			window[e] = actions[(next+e)%len(actions)]
		}
		next += batch
		if ev.before != nil {
			b.StopTimer()
			for _, a := range window {
				a.before(s)
			}
			b.StartTimer()
		}
		for _, a := range window {
			a.timed(s)
		}
		b.StopTimer()
		for _, a := range window {
			if a.after != nil {
				a.after(s)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(batch), "events/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}

// BenchmarkRebuild measures the same events handled by a controller that
// rebuilds a policy-machinery topology from its object store on every event.
func BenchmarkRebuild(b *testing.B) {
	for _, n := range benchSizes(b) {
		if n > *rebuildMaxNodes {
			continue
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for _, ev := range benchEvents {
				b.Run(ev.name, func(b *testing.B) {
					c := clusterOf(b, n)
					s := worldSink{w: c.world}
					actions := ev.prepare(c.picks(benchPicks, ev.perWorkload, ev.modes))
					b.ReportAllocs()
					b.ResetTimer()
					for op := range b.N {
						a := actions[op%len(actions)]
						if a.before != nil {
							b.StopTimer()
							a.before(s)
							b.StartTimer()
						}
						a.timed(s)
						if _, err := rebuildMachinery(c.world, *rebuildDAGChecks); err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
						switch {
						case a.undo != nil:
							a.undo(s)
						case a.after != nil:
							a.after(s)
						}
						b.StartTimer()
					}
					b.ReportMetric(1, "events/op")
				})
			}
		})
	}
}

// BenchmarkBuild measures building the whole topology from scratch, which
// is what the operator does at startup, and reports the heap that the built
// topology keeps per node.
func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := clusterOf(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rebuild(b, c.world, nil)
			}
			b.StopTimer()
			nodes := 0
			for _, count := range c.top.Snapshot().Counts() {
				nodes += count
			}
			b.ReportMetric(float64(nodes), "graph-nodes")
			b.ReportMetric(float64(c.retained)/float64(nodes), "retained-B/node")
		})
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
