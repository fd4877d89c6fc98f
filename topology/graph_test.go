package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	"gonum.org/v1/gonum/graph/topo"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The graph layer on its own: the typed layer makes edges from a lower layer
// to a higher one only, which is what keeps the graph acyclic, so the guard
// is tested here, on random graphs over four layers where many edges go
// against the layers.

func node(i int) Key { return Key{Kind: KindSource, Namespace: "g", Name: fmt.Sprint(i)} }

// edgeSet lists a graph's edges.
func edgeSet(g *graph[struct{}]) map[[2]Key]rel {
	out := map[[2]Key]rel{}
	for k, n := range g.nodes.all() {
		for c, r := range n.out.all() {
			out[[2]Key{k, c}] = r
			in, _ := g.nodes.get(c)
			if r2, ok := in.in.get(k); !ok || r2 != r {
				panic(fmt.Sprintf("edge %s → %s missing from the child's parents", k, c))
			}
		}
	}
	return out
}

func TestLayerGuard(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := NewWithT(t)
			r := rand.New(rand.NewPCG(seed, 7))
			var gr graph[struct{}]
			owner := newToken()
			const nodes, layers = 30, 4
			layer := func(i int) int { return i % layers }
			for i := range nodes {
				g.Expect(gr.addNode(owner, node(i), layer(i), struct{}{})).To(Succeed())
			}
			want := map[[2]Key]rel{}
			refused := 0
			for range 400 {
				i, j := r.IntN(nodes), r.IntN(nodes)
				u, v := node(i), node(j)
				if r.IntN(4) == 0 {
					_, had := want[[2]Key{u, v}]
					g.Expect(gr.removeEdge(owner, u, v)).To(Equal(had))
					delete(want, [2]Key{u, v})
					continue
				}
				before := edgeSet(&gr)
				_, err := gr.addEdge(owner, u, v, relTargets)
				if layer(i) >= layer(j) {
					refused++
					g.Expect(errors.Is(err, ErrCycle)).To(BeTrue(), "%s → %s goes against the layers", u, v)
					g.Expect(edgeSet(&gr)).To(Equal(before), "a refused edge changes nothing")
					continue
				}
				g.Expect(err).NotTo(HaveOccurred())
				want[[2]Key{u, v}] = relTargets
				g.Expect(edgeSet(&gr)).To(Equal(want))
			}
			_, err := topo.Sort(newGonumGraph(&gr))
			g.Expect(err).NotTo(HaveOccurred(), "the edges the guard lets in never close a cycle")
			g.Expect(refused).To(BeNumerically(">", 0), "the sequence must try edges against the layers")
		})
	}
}

func TestGraphEdits(t *testing.T) {
	g := NewWithT(t)
	var gr graph[struct{}]
	owner := newToken()
	a, b, c := node(1), node(2), node(3)
	for layer, k := range []Key{a, b, c} {
		g.Expect(gr.addNode(owner, k, layer, struct{}{})).To(Succeed())
	}
	g.Expect(gr.addNode(owner, a, 0, struct{}{})).To(MatchError(ContainSubstring("already present")))

	added, err := gr.addEdge(owner, a, b, relRefs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(added).To(BeTrue())
	added, err = gr.addEdge(owner, a, b, relRefs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(added).To(BeFalse(), "adding an edge twice is no change")
	_, err = gr.addEdge(owner, a, b, relMounts)
	g.Expect(err).To(MatchError(ContainSubstring("already there as refs")))
	_, err = gr.addEdge(owner, a, node(9), relRefs)
	g.Expect(err).To(MatchError(ContainSubstring("no node")))
	_, err = gr.addEdge(owner, b, b, relRefs)
	g.Expect(errors.Is(err, ErrCycle)).To(BeTrue(), "a node is not its own child")

	g.Expect(gr.addEdge(owner, b, c, relRenders)).Error().NotTo(HaveOccurred())
	_, err = gr.addEdge(owner, c, a, relMounts)
	g.Expect(errors.Is(err, ErrCycle)).To(BeTrue(), "c → a would close a → b → c → a")

	g.Expect(gr.removeNode(owner, b)).To(BeTrue())
	g.Expect(edgeSet(&gr)).To(BeEmpty(), "removing a node removes its edges on both sides")
	g.Expect(gr.removeNode(owner, b)).To(BeFalse())
	_, err = gr.addEdge(owner, c, a, relMounts)
	g.Expect(errors.Is(err, ErrCycle)).To(BeTrue(), "against the layers even without b: the layers alone decide")
	g.Expect(gr.addEdge(owner, a, c, relMounts)).Error().NotTo(HaveOccurred())
}

// TestFailedEditLeavesNoTrace forces an edit to fail after it has changed
// things, as only a bug in the typed layer could, and checks that the
// topology is as if the edit never happened.
func TestFailedEditLeavesNoTrace(t *testing.T) {
	g := NewWithT(t)
	top := New()
	must(t)(top.UpsertFlagSet(newFlagSet("shop", "flags", "on")))
	must(t)(top.UpsertWorkload(deployment("shop", "web", map[string]string{"app": "web"}, nil)))
	src := newSource("shop", "src", ref("flags", ""), selector(matchLabels("app", "web")))
	must(t)(top.UpsertSource(src))
	before := top.Snapshot()
	beforeDOT, beforeAnswers := string(before.DOT()), answers(before)

	changed := newSource("shop", "src", ref("flags", v1beta1.SyncProviderKubernetes), selector(matchLabels("app", "web")))
	d, err := top.apply(srcK("shop", "src"), func(edit *tx) error {
		if err := edit.upsertSource(srcK("shop", "src"), changed); err != nil {
			return err
		}
		_, err := edit.state.g.addEdge(edit.owner, depK("shop", "web"), srcK("shop", "src"), relTargets)
		return err
	})
	g.Expect(errors.Is(err, ErrCycle)).To(BeTrue())
	g.Expect(d.Empty()).To(BeTrue())
	after := top.Snapshot()
	g.Expect(string(after.DOT())).To(Equal(beforeDOT))
	g.Expect(answers(after)).To(Equal(beforeAnswers))
	got, _ := after.Source(srcK("shop", "src"))
	g.Expect(got).To(BeIdenticalTo(src), "the source is as it was before the failed edit")
	g.Expect(string(before.DOT())).To(Equal(beforeDOT), "a view taken before is untouched")

	// The rebuilt topology goes on like any other.
	d = must(t)(top.UpsertSource(changed))
	g.Expect(deltaKeys(d)).To(Equal(expect(srcK("shop", "src"), depK("shop", "web"), fsK("shop", "flags"), cmK(fsK("shop", "flags"), "shop"))))
}
