package dotsvg

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Sizes in points, Graphviz's defaults where it has one.
const (
	nodeSep   = 18.0 // between two nodes of a rank (nodesep=0.25in)
	slotSep   = 10.0 // between an edge's slot and a node of the same rank
	edgeSep   = 6.0  // between the slots of two edges
	rankSep   = 36.0 // between ranks (ranksep=0.5in)
	marginX   = 10.0 // text to border, each side (Graphviz 8: a little more for wider stand-ins of Helvetica)
	marginY   = 4.0
	minWidth  = 54.0 // 0.75in
	minHeight = 36.0 // 0.5in
	pad       = 4.0  // around the drawing
	arrowLen  = 10.0
	labelGap  = 3.0 // between an edge label and its edge
	loopWidth = 30.0

	// maxLayoutNodes bounds the nodes and edge slots a layout makes: a
	// chain as long as the graph with an edge across all of it would
	// otherwise need slots quadratic in the input.
	maxLayoutNodes = 200_000
	// orderRounds is how many sweeps reduce crossings (Graphviz's 24), and
	// stale how many without a better order end them early.
	orderRounds = 24
	stale       = 6
	// placeRounds is how many sweeps straighten the edges.
	placeRounds = 8
)

// layout is a graph laid out: its ranks from left to right, each ordered
// top to bottom.
type layout struct {
	g             *graph
	ranks         [][]*node
	colX, colW    []float64 // centre and width of each rank
	width, height float64
	loops         []*edge // self-loops, drawn beside their node
	// labelled is set when an edge has a label: every edge then crosses a
	// rank between its ends, where its label has room, as in dot.
	labelled bool
}

// lay lays g out.
func lay(g *graph) (*layout, error) {
	l := &layout{g: g}
	l.size()
	l.breakCycles()
	l.rank()
	if err := l.chain(); err != nil {
		return nil, err
	}
	l.order()
	l.placeX()
	l.placeY()
	return l, nil
}

// size measures each node's label and sets its size, and each edge's label.
func (l *layout) size() {
	for _, n := range l.g.nodes {
		text, ok := n.attrs["label"]
		if !ok {
			text = `\N`
		}
		n.label = parseLabel(text, n.id, l.g.name, fontSize(n.attrs))
		n.w = max(n.label.w+2*marginX, inches(n.attrs["width"], minWidth))
		n.h = max(n.label.h+2*marginY, inches(n.attrs["height"], minHeight))
		switch shapeOf(n) {
		case "octagon":
			n.w += n.h * 0.6 // the cut corners
		case "ellipse":
			n.w, n.h = n.w*math.Sqrt2, n.h*math.Sqrt2 // the label's box inscribed
		case "component":
			n.w += 8 // the notches
		}
	}
	for _, e := range l.g.edges {
		if text, ok := e.attrs["label"]; ok && text != "" {
			e.label = parseLabel(text, "", l.g.name, fontSize(e.attrs))
			l.labelled = l.labelled || e.from != e.to
		}
	}
}

// inches reads a size in inches as points, def if it is not one.
func inches(s string, def float64) float64 {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f < 100 {
		return max(f*72, def)
	}
	return def
}

// breakCycles reverses the edges that close a cycle (those to a node on the
// depth-first search's stack) and sets aside self-loops. topology.DOT has
// neither; a DOT from elsewhere may.
func (l *layout) breakCycles() {
	out := make([][]*edge, len(l.g.nodes))
	for _, e := range l.g.edges {
		if e.from == e.to {
			l.loops = append(l.loops, e)
			continue
		}
		out[e.from.index] = append(out[e.from.index], e)
	}
	const (
		unseen = iota
		onStack
		done
	)
	state := make([]int, len(l.g.nodes))
	type frame struct {
		n    *node
		next int
	}
	for _, root := range l.g.nodes {
		if state[root.index] != unseen {
			continue
		}
		stack := []frame{{n: root}}
		state[root.index] = onStack
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(out[f.n.index]) {
				state[f.n.index] = done
				stack = stack[:len(stack)-1]
				continue
			}
			e := out[f.n.index][f.next]
			f.next++
			switch state[e.to.index] {
			case onStack:
				e.reversed = true
			case unseen:
				state[e.to.index] = onStack
				stack = append(stack, frame{n: e.to})
			}
		}
	}
}

// ends are an edge's ends in layout order: from the lower rank.
func (e *edge) ends() (*node, *node) {
	if e.reversed {
		return e.to, e.from
	}
	return e.from, e.to
}

// rank puts each node one rank after its furthest predecessor (the longest
// path), then moves each node without predecessors to just before its
// nearest successor, so that a source is drawn beside what it points at.
// With edge labels, the ranks are doubled to leave a rank for them.
func (l *layout) rank() {
	preds := make([]int, len(l.g.nodes))
	succ := make([][]*node, len(l.g.nodes))
	for _, e := range l.g.edges {
		if e.from == e.to {
			continue
		}
		u, v := e.ends()
		preds[v.index]++
		succ[u.index] = append(succ[u.index], v)
	}
	roots := []*node{}
	queue := []*node{}
	for _, n := range l.g.nodes {
		n.rank = 0
		if preds[n.index] == 0 {
			roots = append(roots, n)
			queue = append(queue, n)
		}
	}
	// Kahn's algorithm: the reversed edges leave a DAG.
	left := slices.Clone(preds)
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range succ[u.index] {
			v.rank = max(v.rank, u.rank+1)
			if left[v.index]--; left[v.index] == 0 {
				queue = append(queue, v)
			}
		}
	}
	for _, r := range roots {
		if len(succ[r.index]) == 0 {
			continue
		}
		nearest := math.MaxInt
		for _, v := range succ[r.index] {
			nearest = min(nearest, v.rank)
		}
		r.rank = nearest - 1
	}
	for _, n := range l.g.nodes {
		n.isolated = preds[n.index] == 0 && len(succ[n.index]) == 0
		if l.labelled {
			n.rank *= 2
		}
	}
}

// chain routes each edge through a virtual node in every rank it crosses
// and groups the nodes by rank.
func (l *layout) chain() error {
	maxRank := 0
	total := len(l.g.nodes)
	for _, n := range l.g.nodes {
		maxRank = max(maxRank, n.rank)
	}
	for _, e := range l.g.edges {
		if e.from != e.to {
			u, v := e.ends()
			total += v.rank - u.rank - 1
		}
	}
	if total > maxLayoutNodes {
		return fmt.Errorf("laying out %d nodes and %d edges needs %d slots, more than %d", len(l.g.nodes), len(l.g.edges), total, maxLayoutNodes)
	}
	l.ranks = make([][]*node, maxRank+1)
	for _, n := range l.g.nodes {
		l.ranks[n.rank] = append(l.ranks[n.rank], n)
	}
	for _, e := range l.g.edges {
		if e.from == e.to {
			continue
		}
		u, v := e.ends()
		e.chain = []*node{u}
		for r := u.rank + 1; r < v.rank; r++ {
			vn := &node{id: u.id + "->" + v.id, virtual: true, rank: r}
			if r == u.rank+1 && len(e.label.lines) > 0 {
				vn.w, vn.h = e.label.w, e.label.h+labelGap
				vn.lineDY = vn.h / 2
				e.labelAt = vn
			}
			l.ranks[r] = append(l.ranks[r], vn)
			e.chain = append(e.chain, vn)
		}
		e.chain = append(e.chain, v)
		for i := 1; i < len(e.chain); i++ {
			a, b := e.chain[i-1], e.chain[i]
			a.out = append(a.out, b)
			b.in = append(b.in, a)
		}
	}
	return nil
}
