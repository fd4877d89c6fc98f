package dotsvg

import (
	"cmp"
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

// order orders each rank to reduce edge crossings: first by the
// barycentres of predecessors, then by sweeps down and up the ranks, each
// followed by swaps of neighbours, keeping the best order seen.
func (l *layout) order() {
	// Nodes without edges go to the bottom, out of the way.
	slices.SortStableFunc(l.ranks[0], func(a, b *node) int {
		switch {
		case a.isolated == b.isolated:
			return 0
		case a.isolated:
			return 1
		}
		return -1
	})
	l.renumber(0)
	for r := 1; r < len(l.ranks); r++ {
		l.sortByBarycentre(r, true)
	}
	best, saved := l.crossings(), l.snapshot()
	for round, since := 0, 0; round < orderRounds && best > 0 && since < stale; round++ {
		if round%2 == 0 {
			for r := 1; r < len(l.ranks); r++ {
				l.sortByBarycentre(r, true)
			}
		} else {
			for r := len(l.ranks) - 2; r >= 0; r-- {
				l.sortByBarycentre(r, false)
			}
		}
		l.transpose()
		if c := l.crossings(); c < best {
			best, saved, since = c, l.snapshot(), 0
		} else {
			since++
		}
	}
	l.restore(saved)
}

func (l *layout) renumber(r int) {
	for i, n := range l.ranks[r] {
		n.order = i
	}
}

func (l *layout) snapshot() [][]*node {
	s := make([][]*node, len(l.ranks))
	for r, rank := range l.ranks {
		s[r] = slices.Clone(rank)
	}
	return s
}

func (l *layout) restore(s [][]*node) {
	l.ranks = s
	for r := range l.ranks {
		l.renumber(r)
	}
}

// sortByBarycentre orders rank r by the mean place of each node's
// neighbours in the rank before it (fromIn) or after it. Nodes without such
// neighbours keep their places; the others fill the rest in order.
func (l *layout) sortByBarycentre(r int, fromIn bool) {
	rank := l.ranks[r]
	type keyed struct {
		n    *node
		bary float64
	}
	var movable []keyed
	fixed := make([]bool, len(rank))
	for i, n := range rank {
		nb := n.out
		if fromIn {
			nb = n.in
		}
		if len(nb) == 0 {
			fixed[i] = true
			continue
		}
		sum := 0
		for _, m := range nb {
			sum += m.order
		}
		movable = append(movable, keyed{n, float64(sum) / float64(len(nb))})
	}
	slices.SortStableFunc(movable, func(a, b keyed) int { return cmp.Compare(a.bary, b.bary) })
	next := make([]*node, len(rank))
	j := 0
	for i := range rank {
		if fixed[i] {
			next[i] = rank[i]
			continue
		}
		next[i] = movable[j].n
		j++
	}
	l.ranks[r] = next
	l.renumber(r)
}

// transpose swaps neighbours in a rank while that removes crossings.
func (l *layout) transpose() {
	for pass, improved := 0, true; improved && pass < 4; pass++ {
		improved = false
		for r, rank := range l.ranks {
			for i := 0; i+1 < len(rank); i++ {
				a, b := rank[i], rank[i+1]
				if pairCrossings(b, a) < pairCrossings(a, b) {
					rank[i], rank[i+1] = b, a
					a.order, b.order = i+1, i
					improved = true
				}
			}
			l.ranks[r] = rank
		}
	}
}

// pairCrossings counts the crossings of a's edges with b's when a is just
// above b.
func pairCrossings(a, b *node) int {
	c := 0
	for _, nb := range [2][2][]*node{{a.in, b.in}, {a.out, b.out}} {
		for _, x := range nb[0] {
			for _, y := range nb[1] {
				if x.order > y.order {
					c++
				}
			}
		}
	}
	return c
}

// crossings counts the edge crossings between all neighbouring ranks:
// the inversions of the lower ends, with the upper ends sorted, counted
// with a Fenwick tree.
func (l *layout) crossings() int {
	total := 0
	for r := 0; r+1 < len(l.ranks); r++ {
		tree := make([]int, len(l.ranks[r+1])+1)
		seen := 0
		for _, u := range l.ranks[r] {
			ends := make([]int, len(u.out))
			for i, v := range u.out {
				ends[i] = v.order
			}
			slices.Sort(ends)
			for _, o := range ends {
				// edges seen so far that end below o cross this one
				lower := 0
				for i := o + 1; i > 0; i -= i & -i {
					lower += tree[i]
				}
				total += seen - lower
			}
			for _, o := range ends {
				for i := o + 1; i < len(tree); i += i & -i {
					tree[i]++
				}
				seen++
			}
		}
	}
	return total
}

// placeX puts the ranks side by side, each as wide as its widest node or
// edge label.
func (l *layout) placeX() {
	l.colX = make([]float64, len(l.ranks))
	l.colW = make([]float64, len(l.ranks))
	gap := make([]float64, len(l.ranks))
	for r, rank := range l.ranks {
		gap[r] = rankSep
		if l.labelled {
			gap[r] = rankSep * 3 / 4
		}
		for _, n := range rank {
			l.colW[r] = max(l.colW[r], n.w)
		}
	}
	x := pad
	for r := range l.ranks {
		l.colX[r] = x + l.colW[r]/2
		x += l.colW[r] + gap[r]
		for _, n := range l.ranks[r] {
			n.x = l.colX[r]
		}
	}
	l.width = x - gap[len(gap)-1] + pad
	if len(l.loops) > 0 {
		l.width += loopWidth
	}
}

// placeY places the nodes of each rank top to bottom in their order, each
// as near as the spacing allows to the mean of its neighbours: sweeps down
// and up the ranks, then both ways at once. Each rank's placement is the
// least-squares one under the spacing, found by pooling adjacent
// violators.
func (l *layout) placeY() {
	for _, rank := range l.ranks {
		y := 0.0
		for i, n := range rank {
			if i > 0 {
				y += spacing(rank[i-1], n)
			}
			n.y = y
		}
		for _, n := range rank {
			n.y -= y / 2
		}
	}
	for round := 0; round < placeRounds; round++ {
		for r := 1; r < len(l.ranks); r++ {
			l.align(r, true, false)
		}
		for r := len(l.ranks) - 2; r >= 0; r-- {
			l.align(r, false, true)
		}
	}
	for round := 0; round < 2; round++ {
		for r := range l.ranks {
			l.align(r, true, true)
		}
	}
	top, bottom := math.Inf(1), math.Inf(-1)
	for _, n := range l.allNodes() {
		top, bottom = min(top, n.y-n.h/2), max(bottom, n.y+n.h/2)
	}
	for _, e := range l.loops {
		top, bottom = min(top, e.from.y-loopWidth/2), max(bottom, e.from.y+loopWidth/2)
	}
	if math.IsInf(top, 1) {
		top, bottom = 0, 0
	}
	for _, n := range l.allNodes() {
		n.y += pad - top
	}
	l.height = bottom - top + 2*pad
}

func (l *layout) allNodes() []*node {
	var all []*node
	for _, rank := range l.ranks {
		all = append(all, rank...)
	}
	return all
}

// spacing is the least distance between the centres of a and b, neighbours
// in a rank.
func spacing(a, b *node) float64 {
	s := nodeSep
	switch {
	case a.virtual && b.virtual:
		s = edgeSep
	case a.virtual || b.virtual:
		s = slotSep
	}
	return (a.h+b.h)/2 + s
}

// align moves rank r's nodes towards the mean y of their neighbours
// before (in) and after (out) it, keeping the order and the spacing.
func (l *layout) align(r int, in, out bool) {
	rank := l.ranks[r]
	if len(rank) == 0 {
		return
	}
	// With offset[i] the least distance from the first node to the i-th,
	// y[i]-offset[i] must not decrease: an isotonic regression.
	offset := make([]float64, len(rank))
	for i := 1; i < len(rank); i++ {
		offset[i] = offset[i-1] + spacing(rank[i-1], rank[i])
	}
	want := make([]float64, len(rank))
	weight := make([]float64, len(rank))
	anchor := -1 // a node with edges, for those without to keep close to
	for i, n := range rank {
		sum, count := 0.0, 0
		if in {
			for _, m := range n.in {
				sum += m.y + m.lineDY
				count++
			}
		}
		if out {
			for _, m := range n.out {
				sum += m.y + m.lineDY
				count++
			}
		}
		switch {
		case n.isolated:
			continue
		case count == 0:
			want[i], weight[i] = n.y, 0.5
		case n.virtual:
			// an edge's slot pulls hardest: long edges run straight
			want[i], weight[i] = sum/float64(count)-n.lineDY, 8
		default:
			want[i], weight[i] = sum/float64(count), 1
		}
		if anchor < 0 {
			anchor = i
		}
	}
	for i, n := range rank {
		switch {
		case !n.isolated:
		case anchor < 0:
			want[i], weight[i] = n.y, 1
		default:
			want[i], weight[i] = want[anchor]+offset[i]-offset[anchor], 0.01
		}
	}
	type block struct {
		sum, weight float64
		n           int
	}
	var blocks []block
	for i := range rank {
		b := block{sum: (want[i] - offset[i]) * weight[i], weight: weight[i], n: 1}
		for len(blocks) > 0 {
			last := blocks[len(blocks)-1]
			if last.sum/last.weight <= b.sum/b.weight {
				break
			}
			b = block{sum: b.sum + last.sum, weight: b.weight + last.weight, n: b.n + last.n}
			blocks = blocks[:len(blocks)-1]
		}
		blocks = append(blocks, b)
	}
	i := 0
	for _, b := range blocks {
		z := b.sum / b.weight
		for k := 0; k < b.n; k++ {
			rank[i].y = z + offset[i]
			i++
		}
	}
}
