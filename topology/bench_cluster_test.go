package topology

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The benchmark cluster: about 10 % sources, 10 % flag sets and 80 %
// workloads over 100 namespaces. Source i of a namespace renders flag set i
// to the 8 workloads of group i, which it targets by selector, by targetRefs
// or through the workloads' annotations (a third each); one source in ten
// also reads the flag set of the same index in the next namespace with the
// kubernetes provider, which a grant there permits to that flag set. Every node's degree is
// the same at every size, as in a cluster that grows by adding teams rather
// than by making each team bigger.

const (
	benchNamespaces   = 100
	workloadsPerGroup = 8
)

// Targeting modes of bench sources, and a filter for the sources that have
// a cross-namespace reference.
const (
	bySelector = iota
	byTargetRefs
	byAnnotation
	withCrossRef
)

func hasCrossRef(nsi, i int) bool { return (nsi+i)%10 == 0 }

func benchNs(i int) string { return fmt.Sprintf("ns-%02d", (i+benchNamespaces)%benchNamespaces) }

func benchMode(nsi, i int) int { return (nsi + i) % 3 }

func benchFlagSet(nsi, i int, variant string) *v1beta1.FeatureFlag {
	ff := newFlagSet(benchNs(nsi), fmt.Sprintf("flags-%d", i), variant)
	ff.Spec.FlagSpec.Flags["checkout-v2"] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: "off"}
	ff.Spec.FlagSpec.Flags["banner"] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: []byte(`{"a":"hello","b":"hi"}`), DefaultVariant: "a"}
	return ff
}

// benchSourceOpts varies a bench source: debug toggles a sidecar setting,
// narrow targets half of the group (for sources that target by selector or
// targetRefs), name and group override the defaults for extra sources.
type benchSourceOpts struct {
	debug, narrow bool
	name          string
}

func benchSource(nsi, i int, o benchSourceOpts) *v1beta1.FeatureFlagSource {
	name := o.name
	if name == "" {
		name = fmt.Sprintf("src-%d", i)
	}
	s := newSource(benchNs(nsi), name, ref(fmt.Sprintf("flags-%d", i), v1beta1.SyncProviderFile), debugLogging(o.debug))
	if hasCrossRef(nsi, i) {
		s.Spec.Sources = append(s.Spec.Sources, v1beta1.Source{Source: fmt.Sprintf("%s/flags-%d", benchNs(nsi+1), i), Provider: v1beta1.SyncProviderKubernetes})
	}
	switch benchMode(nsi, i) {
	case bySelector:
		sel := matchLabels("app.kubernetes.io/part-of", fmt.Sprintf("group-%d", i))
		if o.narrow {
			sel.MatchLabels["tier"] = "web"
		}
		s.Spec.Selector = sel
	case byTargetRefs:
		n := workloadsPerGroup
		if o.narrow {
			n /= 2
		}
		for j := range n {
			w := benchWorkload(nsi, i, j, benchWorkloadOpts{})
			s.Spec.TargetRefs = append(s.Spec.TargetRefs, v1beta1.TargetRef{Group: "apps", Kind: string(w.Kind), Name: w.Name})
		}
	}
	return s
}

// benchWorkloadOpts varies a bench workload: unassigned drops it from its
// group's selector, revision changes a label no selector reads, optOut
// disables its annotation, name overrides the default for extra workloads.
type benchWorkloadOpts struct {
	unassigned, optOut bool
	revision           string
	name               string
}

func benchWorkload(nsi, i, j int, o benchWorkloadOpts) Workload {
	kind := KindDeployment
	switch j {
	case 6:
		kind = KindStatefulSet
	case 7:
		kind = KindDaemonSet
	}
	name := o.name
	if name == "" {
		name = fmt.Sprintf("app-%d-%d", i, j)
	}
	tier := "worker"
	if j < workloadsPerGroup/2 {
		tier = "web"
	}
	group := fmt.Sprintf("group-%d", i)
	if o.unassigned {
		group = "unassigned"
	}
	w := Workload{
		Kind: kind, Namespace: benchNs(nsi), Name: name,
		Labels: map[string]string{
			"app.kubernetes.io/name":    name,
			"app.kubernetes.io/part-of": group,
			"tier":                      tier,
		},
		PodAnnotations:     map[string]string{"kubectl.kubernetes.io/default-container": "app"},
		ServiceAccountName: "app",
	}
	if o.revision != "" {
		w.Labels["revision"] = o.revision
	}
	if benchMode(nsi, i) == byAnnotation {
		w.PodAnnotations[v1beta1.AnnotationEnabled] = fmt.Sprint(!o.optOut)
		w.PodAnnotations[v1beta1.AnnotationFeatureFlagSource] = fmt.Sprintf("src-%d", i)
	}
	return w
}

// benchGrant is the grant in namespace nsi+1 that lets source i of
// namespace nsi read flag set i there (when permit is true).
func benchGrant(nsi, i int, permit bool) Grant {
	var from []string
	if permit {
		from = []string{benchNs(nsi)}
	}
	return flagSetGrant(benchNs(nsi+1), fmt.Sprintf("flags-%d-from-prev", i), from, fmt.Sprintf("flags-%d", i))
}

// benchCluster is the objects of one size and the topology built from them.
type benchCluster struct {
	nodes, perNs int
	world        *world
	top          *Topology
	// retained is the heap the built topology holds, in bytes.
	retained uint64
}

var (
	benchClustersMu sync.Mutex
	benchClusters   = map[int]*benchCluster{}
)

// clusterOf builds the bench cluster of about n object nodes, or returns
// the one it built last if it has that size.
func clusterOf(tb testing.TB, n int) *benchCluster {
	benchClustersMu.Lock()
	defer benchClustersMu.Unlock()
	if c, ok := benchClusters[n]; ok {
		return c
	}
	clear(benchClusters) // one size at a time: see BenchmarkIncremental
	runtime.GC()
	c := &benchCluster{nodes: n, perNs: n / (benchNamespaces * (2 + workloadsPerGroup)), world: newWorld()}
	if c.perNs < 1 {
		tb.Fatalf("cluster of %d nodes: at least %d needed", n, benchNamespaces*(2+workloadsPerGroup))
	}
	w := c.world
	for nsi := range benchNamespaces {
		for i := range c.perNs {
			if hasCrossRef(nsi, i) {
				g := benchGrant(nsi, i, true)
				w.grants[g.Key()] = g
			}
			ff := benchFlagSet(nsi, i, "on")
			w.flagSets[FlagSetKey(ff.Namespace, ff.Name)] = ff
			s := benchSource(nsi, i, benchSourceOpts{})
			w.sources[SourceKey(s.Namespace, s.Name)] = s
			for j := range workloadsPerGroup {
				wl := benchWorkload(nsi, i, j, benchWorkloadOpts{})
				w.workloads[wl.Key()] = wl
			}
		}
	}
	before := heapInUse()
	c.top = rebuild(tb, w, nil)
	c.retained = heapInUse() - before
	benchClusters[n] = c
	return c
}

// fork returns a topology that starts from t's current state and goes its
// own way; t must not be edited afterwards. O(1): the state is persistent.
func (t *Topology) fork() *Topology {
	t.Snapshot() // t's state is shared from now on
	return &Topology{state: t.state, token: newToken(), shared: true}
}

// benchPick is one object of the cluster that an event acts on.
type benchPick struct{ nsi, i, j int }

func (p benchPick) is(mode int) bool {
	if mode == withCrossRef {
		return hasCrossRef(p.nsi, p.i)
	}
	return benchMode(p.nsi, p.i) == mode
}

// picks draws up to n distinct objects an event can act on, shuffled over
// the whole cluster so that events do not stay in the cache: sources (j is
// 0), or workloads when perWorkload, whose source targets in one of modes
// (any when there are none).
func (c *benchCluster) picks(n int, perWorkload bool, modes []int) []benchPick {
	var all []benchPick
	for nsi := range benchNamespaces {
		for i := range c.perNs {
			for j := range workloadsPerGroup {
				p := benchPick{nsi: nsi, i: i, j: j}
				if (j == 0 || perWorkload) && (len(modes) == 0 || slices.ContainsFunc(modes, p.is)) {
					all = append(all, p)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, uint64(c.nodes)))
	r.Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
	return all[:min(n, len(all))]
}
