package dotsvg

import "math"

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
