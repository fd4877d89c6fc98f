package topology

import (
	"errors"
	"fmt"
	"slices"
)

// This file is the graph layer: a persistent directed acyclic graph of keys
// with labelled edges, knowing nothing about flags. The typed layer
// (topology.go and the per-kind files) decides which edges exist; this layer
// stores them, keeps both directions, and refuses any edge that does not go
// from a lower layer to a higher one, which keeps it acyclic.

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

// ErrCycle is returned (wrapped) for an edge that does not go from a lower
// layer to a higher one. Every edge the schema makes does (sources above flag
// sets above ConfigMaps above workloads), which is what rules out cycles; an
// edge that does not is a bug of the typed layer, refused before it can
// close one.
var ErrCycle = errors.New("edge against the layer order (it could close a cycle)")

// gnode is a node of the graph. Like trie nodes, a gnode is owned by the
// token it was made under and is copied, not changed, by other tokens.
type gnode[P any] struct {
	owner token
	// layer is the node's layer: every edge goes from a lower layer to a
	// higher one, so the layers are a topological order of the graph.
	layer   int
	out, in pmap[Key, rel]
	payload P
}

// graph is a persistent DAG. Copying the struct is a snapshot of it.
type graph[P any] struct {
	nodes pmap[Key, *gnode[P]]
	// counts counts nodes by kind (kindIndex). Listing the nodes of a kind
	// scans them all: lists are for startup and garbage collection, while a
	// per-kind index would cost every create and delete.
	counts [len(nodeKinds)]int
}

func (g *graph[P]) node(k Key) (*gnode[P], bool) { return g.nodes.get(k) }

func (g *graph[P]) has(k Key) bool { return g.nodes.has(k) }

// mut returns k's node for writing under owner, copying it if owner does not own it.
func (g *graph[P]) mut(owner token, k Key) *gnode[P] {
	n, ok := g.nodes.get(k)
	if !ok {
		return nil
	}
	if n.owner == owner {
		return n
	}
	c := *n
	c.owner = owner
	g.nodes.set(owner, k, &c)
	return &c
}

// addNode adds a node in a layer (lower layers are parents).
func (g *graph[P]) addNode(owner token, k Key, layer int, value P) error {
	if g.nodes.has(k) {
		return fmt.Errorf("adding node %s: already present", k)
	}
	n := &gnode[P]{owner: owner, layer: layer, payload: value}
	g.nodes.set(owner, k, n)
	if i := kindIndex(k.Kind); i >= 0 {
		g.counts[i]++
	}
	return nil
}

func (g *graph[P]) setPayload(owner token, k Key, value P) {
	if n := g.mut(owner, k); n != nil {
		n.payload = value
	}
}

// removeNode removes a node and its edges; it tells whether it was there.
func (g *graph[P]) removeNode(owner token, k Key) bool {
	n, ok := g.nodes.get(k)
	if !ok {
		return false
	}
	for _, c := range n.out.keys() {
		g.mut(owner, c).in.del(owner, k)
	}
	for _, parent := range n.in.keys() {
		g.mut(owner, parent).out.del(owner, k)
	}
	g.nodes.del(owner, k)
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
// with an error wrapping ErrCycle, an edge that does not go from a lower
// layer to a higher one, and leaves the graph as it was: one comparison
// keeps the graph acyclic.
func (g *graph[P]) addEdge(owner token, from, to Key, r rel) (bool, error) {
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
	if fn.layer >= tn.layer {
		return false, fmt.Errorf("adding edge %s → %s (layer %d to %d): %w", from, to, fn.layer, tn.layer, ErrCycle)
	}
	g.mut(owner, from).out.set(owner, to, r)
	g.mut(owner, to).in.set(owner, from, r)
	return true, nil
}

// removeEdge removes the edge from → to and tells whether it was there.
func (g *graph[P]) removeEdge(owner token, from, to Key) bool {
	if _, ok := g.edge(from, to); !ok {
		return false
	}
	g.mut(owner, from).out.del(owner, to)
	g.mut(owner, to).in.del(owner, from)
	return true
}

// children lists the children of k by relation r, unordered.
func (g *graph[P]) children(k Key, r rel) []Key { return g.adjacent(k, r, false) }

// parents lists the parents of k by relation r, unordered.
func (g *graph[P]) parents(k Key, r rel) []Key { return g.adjacent(k, r, true) }

func (g *graph[P]) adjacent(k Key, r rel, up bool) []Key {
	return g.adjacentOfKind(k, r, up, "")
}

// parentsOfKind lists the parents of k by relation r of one kind, unordered.
func (g *graph[P]) parentsOfKind(k Key, r rel, kind Kind) []Key {
	return g.adjacentOfKind(k, r, true, kind)
}

// adjacentOfKind lists the neighbours of k by relation r, of kind unless
// kind is "", in one allocation.
func (g *graph[P]) adjacentOfKind(k Key, r rel, up bool, kind Kind) []Key {
	n, ok := g.nodes.get(k)
	if !ok {
		return nil
	}
	m := n.out
	if up {
		m = n.in
	}
	match := func(c Key, cr rel) bool { return cr == r && (kind == "" || c.Kind == kind) }
	count := 0
	for c, cr := range m.all() {
		if match(c, cr) {
			count++
		}
	}
	if count == 0 {
		return nil
	}
	out := make([]Key, 0, count)
	for c, cr := range m.all() {
		if match(c, cr) {
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
