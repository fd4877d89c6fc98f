package topology

import (
	"errors"
	"fmt"
	"slices"

	gonum "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/traverse"
)

// This file is the graph layer: a persistent directed acyclic graph of keys
// with labelled edges, knowing nothing about flags. The typed layer
// (topology.go and the per-kind files) decides which edges exist; this layer
// stores them, keeps both directions, and refuses any edge that would close a
// cycle.

// rel is the relation an edge stands for.
type rel uint8

// Edge relations, parent → child.
const (
	// relRefs: Source → FlagSet, a resolved spec.sources[] entry.
	relRefs rel = iota + 1
	// relRenders: FlagSet → ConfigMap.
	relRenders
	// relMounts: ConfigMap → Workload.
	relMounts
	// relTargets: Source or InProcessConfig → Workload.
	relTargets
	// relServes: Source → Flagd, a Flagd's resolved spec.featureFlagSource.
	relServes
)

func (r rel) String() string {
	switch r {
	case relRefs:
		return "refs"
	case relRenders:
		return "renders"
	case relMounts:
		return "mounts"
	case relTargets:
		return "targets"
	case relServes:
		return "serves"
	}
	return fmt.Sprintf("rel(%d)", uint8(r))
}

// ErrCycle is returned (wrapped) for an edit that would close a cycle.
var ErrCycle = errors.New("edge would close a cycle")

// gnode is a node of the graph. Like trie nodes, a gnode is owned by the
// token it was made under and is copied, not changed, by other tokens.
type gnode[P any] struct {
	owner edit
	// ord is the node's position in a topological order of the graph that
	// the graph keeps at all times (every edge goes from a lower to a higher
	// ord), so that most edges are checked for cycles in O(1).
	ord     int64
	out, in pmap[Key, rel]
	payload P
}

// graph is a persistent DAG. Copying the struct is a snapshot of it.
type graph[P any] struct {
	nodes pmap[Key, *gnode[P]]
	// counts counts nodes by kind (kindIndex). Listing the nodes of a kind
	// scans them all: lists are for startup and garbage collection, while a
	// per-kind index would cost every create and delete.
	counts [len(allKinds)]int
	// seq numbers nodes in the order they are added, to order them initially.
	seq int64
}

// layerShift places a node's layer above its sequence number in the initial
// ord, so that a caller that knows its schema (sources above flag sets above
// ConfigMaps above workloads) makes every edge respect the order from the
// start and the cycle check never has to search.
const layerShift = 40

func (g *graph[P]) node(k Key) (*gnode[P], bool) { return g.nodes.get(k) }

func (g *graph[P]) has(k Key) bool { return g.nodes.has(k) }

// mut returns k's node for writing under token o, copying it if o does not own it.
func (g *graph[P]) mut(o edit, k Key) *gnode[P] {
	n, ok := g.nodes.get(k)
	if !ok {
		return nil
	}
	if n.owner == o {
		return n
	}
	c := *n
	c.owner = o
	g.nodes.set(o, k, &c)
	return &c
}

// addNode adds a node; layer orders it initially (lower layers are parents).
func (g *graph[P]) addNode(o edit, k Key, layer int, p P) error {
	if g.nodes.has(k) {
		return fmt.Errorf("adding node %s: already present", k)
	}
	g.seq++
	n := &gnode[P]{owner: o, ord: int64(layer)<<layerShift | g.seq, payload: p}
	g.nodes.set(o, k, n)
	if i := kindIndex(k.Kind); i >= 0 {
		g.counts[i]++
	}
	return nil
}

func (g *graph[P]) setPayload(o edit, k Key, p P) {
	if n := g.mut(o, k); n != nil {
		n.payload = p
	}
}

// removeNode removes a node and its edges; it tells whether it was there.
func (g *graph[P]) removeNode(o edit, k Key) bool {
	n, ok := g.nodes.get(k)
	if !ok {
		return false
	}
	for _, c := range n.out.keys() {
		g.mut(o, c).in.del(o, k)
	}
	for _, p := range n.in.keys() {
		g.mut(o, p).out.del(o, k)
	}
	g.nodes.del(o, k)
	if i := kindIndex(k.Kind); i >= 0 {
		g.counts[i]--
	}
	return true
}

// edge returns the relation of the edge from → to, if there is one.
func (g *graph[P]) edge(from, to Key) (rel, bool) {
	n, ok := g.nodes.get(from)
	if !ok {
		return 0, false
	}
	return n.out.get(to)
}

// addEdge adds the edge from → to and tells whether it is new. It refuses,
// with an error wrapping ErrCycle, an edge that would close a cycle, and
// leaves the graph as it was.
func (g *graph[P]) addEdge(o edit, from, to Key, r rel) (bool, error) {
	if from == to {
		return false, fmt.Errorf("adding edge %s → %s: %w", from, to, ErrCycle)
	}
	fn, ok := g.nodes.get(from)
	if !ok {
		return false, fmt.Errorf("adding edge %s → %s: no node %s", from, to, from)
	}
	tn, ok := g.nodes.get(to)
	if !ok {
		return false, fmt.Errorf("adding edge %s → %s: no node %s", from, to, to)
	}
	if have, ok := fn.out.get(to); ok {
		if have != r {
			return false, fmt.Errorf("adding edge %s → %s as %s: already there as %s", from, to, r, have)
		}
		return false, nil
	}
	if fn.ord > tn.ord {
		if err := g.reorder(o, from, to); err != nil {
			return false, fmt.Errorf("adding edge %s → %s: %w", from, to, err)
		}
	}
	g.mut(o, from).out.set(o, to, r)
	g.mut(o, to).in.set(o, from, r)
	return true, nil
}

// removeEdge removes the edge from → to and tells whether it was there.
func (g *graph[P]) removeEdge(o edit, from, to Key) bool {
	if _, ok := g.edge(from, to); !ok {
		return false
	}
	g.mut(o, from).out.del(o, to)
	g.mut(o, to).in.del(o, from)
	return true
}

// reorder restores the topological order before the edge x → y is added,
// where y comes before x, or reports the cycle the edge would close. It is
// the Pearce–Kelly algorithm ("A dynamic topological sort algorithm for
// directed acyclic graphs", 2006): only nodes between y and x in the order
// are searched and renumbered, using gonum's depth-first traversal.
func (g *graph[P]) reorder(o edit, x, y Key) error {
	xn, _ := g.nodes.get(x)
	yn, _ := g.nodes.get(y)
	lower, upper := yn.ord, xn.ord
	ordOf := func(n gonum.Node) int64 {
		gn, _ := g.nodes.get(n.(GraphNode).key)
		return gn.ord
	}
	fwd := gonumGraph[P]{g: g, ix: &nodeIndex{ids: map[Key]int64{}}}
	xNode, yNode := fwd.ix.node(x), fwd.ix.node(y)

	// Forward from y through nodes ordered before x: reaching x is a cycle.
	var forward []GraphNode
	fw := traverse.DepthFirst{
		Visit:    func(n gonum.Node) { forward = append(forward, n.(GraphNode)) },
		Traverse: func(e gonum.Edge) bool { return ordOf(e.To()) <= upper },
	}
	if fw.Walk(fwd, yNode, func(n gonum.Node) bool { return n.ID() == xNode.id }) != nil {
		return ErrCycle
	}
	// Backward from x through nodes ordered after y.
	var backward []GraphNode
	bw := traverse.DepthFirst{
		Visit:    func(n gonum.Node) { backward = append(backward, n.(GraphNode)) },
		Traverse: func(e gonum.Edge) bool { return ordOf(e.To()) > lower },
	}
	bw.Walk(reversedGraph[P]{fwd}, xNode, nil)

	// The affected nodes keep their pool of positions: x's ancestors take
	// the lowest ones, y's descendants the highest, each group in its order.
	byOrd := func(a, b GraphNode) int { return cmpInt64(ordOf(a), ordOf(b)) }
	slices.SortFunc(backward, byOrd)
	slices.SortFunc(forward, byOrd)
	affected := append(backward, forward...)
	pool := make([]int64, len(affected))
	for i, n := range affected {
		pool[i] = ordOf(n)
	}
	slices.Sort(pool)
	for i, n := range affected {
		g.mut(o, n.key).ord = pool[i]
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// children lists the children of k by relation r, unordered.
func (g *graph[P]) children(k Key, r rel) []Key { return g.adjacent(k, r, false) }

// parents lists the parents of k by relation r, unordered.
func (g *graph[P]) parents(k Key, r rel) []Key { return g.adjacent(k, r, true) }

func (g *graph[P]) adjacent(k Key, r rel, up bool) []Key {
	n, ok := g.nodes.get(k)
	if !ok {
		return nil
	}
	m := n.out
	if up {
		m = n.in
	}
	var out []Key
	for c, cr := range m.all() {
		if cr == r {
			out = append(out, c)
		}
	}
	return out
}

// countParents counts the parents of k by relation r, up to limit (0: all).
func (g *graph[P]) countParents(k Key, r rel, limit int) int {
	n, ok := g.nodes.get(k)
	if !ok {
		return 0
	}
	c := 0
	for _, pr := range n.in.all() {
		if pr == r {
			c++
			if c == limit {
				break
			}
		}
	}
	return c
}

// countChildren counts the children of k by relation r.
func (g *graph[P]) countChildren(k Key, r rel) int {
	n, ok := g.nodes.get(k)
	if !ok {
		return 0
	}
	c := 0
	for _, cr := range n.out.all() {
		if cr == r {
			c++
		}
	}
	return c
}

// ofKind lists the nodes whose kind is one of kinds, sorted.
func (g *graph[P]) ofKind(kinds ...Kind) []Key {
	var out []Key
	for k := range g.nodes.all() {
		if slices.Contains(kinds, k.Kind) {
			out = append(out, k)
		}
	}
	return sortedKeys(out)
}

func sortedKeys(keys []Key) []Key {
	slices.SortFunc(keys, compareKeys)
	return keys
}

func compareKeys(a, b Key) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}
