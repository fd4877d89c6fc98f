package dotsvg

import (
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
)

// TestOrderUntangles: a graph that can be drawn without crossings is,
// whatever the order of its statements.
func TestOrderUntangles(t *testing.T) {
	for name, dot := range map[string]string{
		"two edges given crossed": `digraph { a; b; y; x; a -> x; b -> y }`,
		"a tree given backwards": `digraph { r -> c; r -> b; r -> a; c -> c2; c -> c1; b -> b2; b -> b1; a -> a2; a -> a1;
			a1 -> z; b2 -> z2; c1 -> z3 }`,
		"three sources": `digraph { s3 -> f1; s1 -> f3; s2 -> f2; f1 -> w1; f3 -> w3; f2 -> w2; s1 -> w3 }`,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			gr, err := parse([]byte(dot))
			g.Expect(err).NotTo(HaveOccurred())
			l, err := lay(gr)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.crossings()).To(BeZero())
		})
	}
}

// TestCrossings: the Fenwick count equals counting every pair of edges
// between two ranks, for any order.
func TestCrossings(t *testing.T) {
	g := NewWithT(t)
	gr, err := parse(cluster(2, 3))
	g.Expect(err).NotTo(HaveOccurred())
	l, err := lay(gr)
	g.Expect(err).NotTo(HaveOccurred())
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		for r := range l.ranks {
			rng.Shuffle(len(l.ranks[r]), func(i, j int) { l.ranks[r][i], l.ranks[r][j] = l.ranks[r][j], l.ranks[r][i] })
			l.renumber(r)
		}
		pairs := 0
		for r := 0; r+1 < len(l.ranks); r++ {
			type seg struct{ a, b int }
			var segs []seg
			for _, u := range l.ranks[r] {
				for _, v := range u.out {
					segs = append(segs, seg{u.order, v.order})
				}
			}
			for i := range segs {
				for j := range i {
					if (segs[i].a-segs[j].a)*(segs[i].b-segs[j].b) < 0 {
						pairs++
					}
				}
			}
		}
		g.Expect(l.crossings()).To(Equal(pairs))
		g.Expect(pairs).To(BeNumerically(">", 0), "a shuffled cluster has crossings")
	}
}
