package topology

import (
	gonum "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
)

// The graph layer speaks gonum's graph interfaces, so that readers (and the
// property test's acyclicity check) can run any gonum algorithm on a View
// through View.Graph. The storage is not
// one of gonum's graph types because those are mutable maps: a consistent
// snapshot of one would cost a full copy per event.
//
// gonum identifies nodes by int64. Nodes carry no number in the graph (a
// table of them would cost every create and delete); an adapter numbers the
// nodes it hands out instead, in the order it meets them.

var (
	_ gonum.Directed = gonumGraph[struct{}]{}
	_ gonum.Node     = GraphNode{}
	_ gonum.Edge     = GraphEdge{}
)

// GraphNode is a node of View.Graph. IDs hold within one Graph value only:
// use Key to identify a node.
type GraphNode struct {
	id  int64
	key Key
}

// ID is the gonum node ID.
func (n GraphNode) ID() int64 { return n.id }

// Key is the node's key.
func (n GraphNode) Key() Key { return n.key }

// GraphEdge is an edge of View.Graph.
type GraphEdge struct {
	from, to GraphNode
	rel      rel
}

// From is the parent end.
func (e GraphEdge) From() gonum.Node { return e.from }

// To is the child end.
func (e GraphEdge) To() gonum.Node { return e.to }

// ReversedEdge returns the edge turned around.
func (e GraphEdge) ReversedEdge() gonum.Edge { return GraphEdge{from: e.to, to: e.from, rel: e.rel} }

// Relation names what the edge stands for: refs, renders, mounts or targets.
func (e GraphEdge) Relation() string { return e.rel.String() }

// nodeIndex numbers keys for one adapter.
type nodeIndex struct {
	keys []Key
	ids  map[Key]int64
}

func (ix *nodeIndex) node(k Key) GraphNode {
	id, ok := ix.ids[k]
	if !ok {
		id = int64(len(ix.keys))
		ix.keys = append(ix.keys, k)
		ix.ids[k] = id
	}
	return GraphNode{id: id, key: k}
}

func (ix *nodeIndex) key(id int64) (Key, bool) {
	if id < 0 || id >= int64(len(ix.keys)) {
		return Key{}, false
	}
	return ix.keys[id], true
}

// gonumGraph presents a graph as a gonum.Directed. Node lists are sorted by
// key so that gonum's results are deterministic.
type gonumGraph[P any] struct {
	g  *graph[P]
	ix *nodeIndex
}

// newGonumGraph numbers every node in key order, so that the same graph
// always gets the same IDs.
func newGonumGraph[P any](g *graph[P]) gonumGraph[P] {
	a := gonumGraph[P]{g: g, ix: &nodeIndex{ids: map[Key]int64{}}}
	for _, k := range sortedKeys(g.nodes.keys()) {
		a.ix.node(k)
	}
	return a
}

func (a gonumGraph[P]) nodes(keys []Key) gonum.Nodes {
	if len(keys) == 0 {
		return gonum.Empty
	}
	nodes := make([]gonum.Node, len(keys))
	for i, k := range sortedKeys(keys) {
		nodes[i] = a.ix.node(k)
	}
	return iterator.NewOrderedNodes(nodes)
}

func (a gonumGraph[P]) gnode(id int64) (*gnode[P], bool) {
	k, ok := a.ix.key(id)
	if !ok {
		return nil, false
	}
	return a.g.node(k)
}

func (a gonumGraph[P]) Node(id int64) gonum.Node {
	k, ok := a.ix.key(id)
	if !ok || !a.g.has(k) {
		return nil
	}
	return GraphNode{id: id, key: k}
}

func (a gonumGraph[P]) Nodes() gonum.Nodes { return a.nodes(a.g.nodes.keys()) }

func (a gonumGraph[P]) From(id int64) gonum.Nodes {
	n, ok := a.gnode(id)
	if !ok {
		return gonum.Empty
	}
	return a.nodes(n.out.keys())
}

func (a gonumGraph[P]) To(id int64) gonum.Nodes {
	n, ok := a.gnode(id)
	if !ok {
		return gonum.Empty
	}
	return a.nodes(n.in.keys())
}

func (a gonumGraph[P]) HasEdgeBetween(xid, yid int64) bool {
	return a.HasEdgeFromTo(xid, yid) || a.HasEdgeFromTo(yid, xid)
}

func (a gonumGraph[P]) HasEdgeFromTo(uid, vid int64) bool { return a.Edge(uid, vid) != nil }

func (a gonumGraph[P]) Edge(uid, vid int64) gonum.Edge {
	un, ok := a.gnode(uid)
	if !ok {
		return nil
	}
	vk, ok := a.ix.key(vid)
	if !ok {
		return nil
	}
	r, ok := un.out.get(vk)
	if !ok {
		return nil
	}
	uk, _ := a.ix.key(uid)
	return GraphEdge{from: GraphNode{id: uid, key: uk}, to: GraphNode{id: vid, key: vk}, rel: r}
}
