package dotsvg

import (
	"cmp"
	"slices"
)

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
