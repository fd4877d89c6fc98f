package topology

import (
	gonum "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
)

// The graph layer speaks gonum's graph interfaces, so that gonum's
// traversals run on it directly (the cycle check uses them) and readers can
// run any gonum algorithm on a View through View.Graph. The storage is not
// one of gonum's graph types because those are mutable maps: a consistent
// snapshot of one would cost a full copy per event.

var (
	_ gonum.Directed = gonumGraph[struct{}]{}
	_ gonum.Node     = GraphNode{}
	_ gonum.Edge     = GraphEdge{}
)

// GraphNode is a node of View.Graph. Its ID is stable for the life of the
// Topology but means nothing across topologies: use Key to identify it.
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

// gonumGraph presents a graph as a gonum.Directed. Node lists are sorted by
// key so that gonum's results are deterministic.
type gonumGraph[P any] struct{ g *graph[P] }

func (g *graph[P]) graphNode(n *gnode[P]) GraphNode {
	k, _ := g.ids.get(nodeID(n.id))
	return GraphNode{id: n.id, key: k}
}

func (g *graph[P]) byID(id int64) (GraphNode, *gnode[P], bool) {
	k, ok := g.ids.get(nodeID(id))
	if !ok {
		return GraphNode{}, nil, false
	}
	n, _ := g.nodes.get(k)
	return GraphNode{id: id, key: k}, n, true
}

func (g *graph[P]) graphNodes(keys []Key) gonum.Nodes {
	if len(keys) == 0 {
		return gonum.Empty
	}
	nodes := make([]gonum.Node, len(keys))
	for i, k := range sortedKeys(keys) {
		n, _ := g.nodes.get(k)
		nodes[i] = GraphNode{id: n.id, key: k}
	}
	return iterator.NewOrderedNodes(nodes)
}

func (a gonumGraph[P]) Node(id int64) gonum.Node {
	n, _, ok := a.g.byID(id)
	if !ok {
		return nil
	}
	return n
}

func (a gonumGraph[P]) Nodes() gonum.Nodes { return a.g.graphNodes(a.g.nodes.keys()) }

func (a gonumGraph[P]) From(id int64) gonum.Nodes {
	_, n, ok := a.g.byID(id)
	if !ok {
		return gonum.Empty
	}
	return a.g.graphNodes(n.out.keys())
}

func (a gonumGraph[P]) To(id int64) gonum.Nodes {
	_, n, ok := a.g.byID(id)
	if !ok {
		return gonum.Empty
	}
	return a.g.graphNodes(n.in.keys())
}

func (a gonumGraph[P]) HasEdgeBetween(xid, yid int64) bool {
	return a.HasEdgeFromTo(xid, yid) || a.HasEdgeFromTo(yid, xid)
}

func (a gonumGraph[P]) HasEdgeFromTo(uid, vid int64) bool { return a.Edge(uid, vid) != nil }

func (a gonumGraph[P]) Edge(uid, vid int64) gonum.Edge {
	u, un, ok := a.g.byID(uid)
	if !ok {
		return nil
	}
	v, _, ok := a.g.byID(vid)
	if !ok {
		return nil
	}
	r, ok := un.out.get(v.key)
	if !ok {
		return nil
	}
	return GraphEdge{from: u, to: v, rel: r}
}

// reversedGraph walks the graph against its edges, for the backward search
// of the cycle check.
type reversedGraph[P any] struct{ g *graph[P] }

func (a reversedGraph[P]) From(id int64) gonum.Nodes { return gonumGraph[P](a).To(id) }

func (a reversedGraph[P]) Edge(uid, vid int64) gonum.Edge {
	e := gonumGraph[P](a).Edge(vid, uid)
	if e == nil {
		return nil
	}
	return e.ReversedEdge()
}
