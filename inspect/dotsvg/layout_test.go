package dotsvg

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// cluster writes the DOT of a made-up cluster in the shape topology.DOT
// writes: per namespace, sources referring to flag sets (by file, with a
// ConfigMap, or kubernetes) and targeting workloads that mount the
// ConfigMaps.
func cluster(namespaces, perNamespace int) []byte {
	var nodes, edges []string
	node := func(id, label, style string) {
		nodes = append(nodes, fmt.Sprintf("  %q [label=%q, %s];", id, label, style))
	}
	edge := func(from, to, style string) {
		edges = append(edges, fmt.Sprintf("  %q -> %q [%s];", from, to, style))
	}
	for n := 0; n < namespaces; n++ {
		ns := fmt.Sprintf("team-%d", n)
		for i := 0; i < perNamespace; i++ {
			src := fmt.Sprintf("featureflagsource:%s/src-%d", ns, i)
			ff := fmt.Sprintf("featureflag:%s/flags-%d", ns, i)
			cm := fmt.Sprintf("configmap:%s/%s/flags-%d", ns, ns, i)
			node(src, `FeatureFlagSource\n`+ns+fmt.Sprintf("/src-%d", i), "shape=note")
			node(ff, `FeatureFlag\n`+ns+fmt.Sprintf("/flags-%d", i), "shape=folder")
			node(cm, `ConfigMap\n`+ns+"/"+ns+fmt.Sprintf(`/flags-%d\nflagd.%s.flags-%d`, i, ns, i), "shape=component")
			edge(src, ff, `style=bold, label="file"`)
			edge(ff, cm, "style=dotted")
			// and the flag set of the next source, by the kubernetes provider
			edge(src, fmt.Sprintf("featureflag:%s/flags-%d", ns, (i+1)%perNamespace), `style=bold, label="kubernetes"`)
			for w := 0; w < 3; w++ {
				wl := fmt.Sprintf("deployment:%s/app-%d-%d", ns, i, w)
				node(wl, `Deployment\n`+ns+fmt.Sprintf("/app-%d-%d", i, w), `shape=box, style=filled, fillcolor="#e5e5e5"`)
				edge(src, wl, "style=dashed")
				edge(cm, wl, "style=solid")
			}
		}
	}
	return []byte("digraph topology {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n" +
		strings.Join(nodes, "\n") + "\n" + strings.Join(edges, "\n") + "\n}\n")
}

// TestLayoutInvariants: whatever the graph, nodes do not overlap, ranks
// go left to right, every edge runs from a rank to a later one, and the
// drawing holds everything.
func TestLayoutInvariants(t *testing.T) {
	inputs := map[string][]byte{
		"cycle":        []byte(`digraph { a -> b -> c -> a; c -> c; c -> d [label="back\nand forth"]; d -> a; e }`),
		"cluster 3x4":  cluster(3, 4),
		"parallel":     []byte(`digraph { a -> b; a -> b; a -> b [label=x]; b -> c; a -> c }`),
		"only loners":  []byte(`digraph { a; b; c [shape=octagon] }`),
		"empty":        []byte(`digraph {}`),
		"default size": []byte(`digraph { "a node with a long name" -> b [label="l"] }`),
	}
	files, _ := filepath.Glob("testdata/*.dot")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(f)] = b
	}
	for name, dot := range inputs {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			gr, err := parse(dot)
			g.Expect(err).NotTo(HaveOccurred())
			l, err := lay(gr)
			g.Expect(err).NotTo(HaveOccurred())
			const eps = 1e-6
			for r, rank := range l.ranks {
				if r > 0 {
					g.Expect(l.colX[r-1]+l.colW[r-1]/2).To(BeNumerically("<", l.colX[r]-l.colW[r]/2), "rank %d ends before rank %d starts", r-1, r)
				}
				for i, n := range rank {
					g.Expect(n.rank).To(Equal(r))
					g.Expect(n.order).To(Equal(i))
					g.Expect(n.x).To(BeNumerically("~", l.colX[r], eps))
					if i > 0 {
						g.Expect(n.y-rank[i-1].y).To(BeNumerically(">=", spacing(rank[i-1], n)-eps), "%s below %s", n.id, rank[i-1].id)
					}
					if !n.virtual {
						g.Expect(n.x-n.w/2).To(BeNumerically(">=", pad-eps), n.id)
						g.Expect(n.y-n.h/2).To(BeNumerically(">=", pad-eps), n.id)
						g.Expect(n.x+n.w/2).To(BeNumerically("<=", l.width-pad+eps), n.id)
						g.Expect(n.y+n.h/2).To(BeNumerically("<=", l.height-pad+eps), n.id)
					}
				}
			}
			for _, e := range gr.edges {
				if e.from == e.to {
					g.Expect(e.chain).To(BeEmpty())
					continue
				}
				g.Expect(len(e.chain)).To(BeNumerically(">=", 2))
				for i := 1; i < len(e.chain); i++ {
					g.Expect(e.chain[i].rank).To(Equal(e.chain[i-1].rank+1), "edge %s -> %s", e.from.id, e.to.id)
				}
				if len(e.label.lines) > 0 {
					g.Expect(e.labelAt).NotTo(BeNil(), "a labelled edge has its label's place")
				}
			}
		})
	}
}

// TestRanks: longest path, with sources beside what they point at; nodes
// without edges at the left; labels get a rank of their own.
func TestRanks(t *testing.T) {
	for name, tt := range map[string]struct {
		dot  string
		want map[string]int
	}{
		"longest path":         {`digraph { a -> b -> c; a -> c }`, map[string]int{"a": 0, "b": 1, "c": 2}},
		"source pulled right":  {`digraph { a -> b -> c; s -> c }`, map[string]int{"a": 0, "b": 1, "c": 2, "s": 1}},
		"loner":                {`digraph { a -> b; z }`, map[string]int{"a": 0, "b": 1, "z": 0}},
		"labels double ranks":  {`digraph { a -> b [label=l]; b -> c }`, map[string]int{"a": 0, "b": 2, "c": 4}},
		"a cycle is broken":    {`digraph { a -> b -> c -> a }`, map[string]int{"a": 0, "b": 1, "c": 2}},
		"a self-loop is aside": {`digraph { a -> a [label=me]; a -> b }`, map[string]int{"a": 0, "b": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			gr, err := parse([]byte(tt.dot))
			g.Expect(err).NotTo(HaveOccurred())
			_, err = lay(gr)
			g.Expect(err).NotTo(HaveOccurred())
			got := map[string]int{}
			for _, n := range gr.nodes {
				got[n.id] = n.rank
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestTooBigToLayOut(t *testing.T) {
	g := NewWithT(t)
	// a chain of 700 nodes and 700 edges from its start to each of them:
	// about 245,000 slots
	var b strings.Builder
	b.WriteString("digraph {\n")
	for i := 1; i < 700; i++ {
		fmt.Fprintf(&b, "n%d -> n%d; n0 -> n%d;\n", i-1, i, i)
	}
	b.WriteString("}\n")
	_, err := Render([]byte(b.String()))
	g.Expect(err).To(MatchError(ContainSubstring("more than 200000")))
}

// BenchmarkRender draws clusters of growing size: 10 namespaces of 1, 10
// and 50 sources, each with a flag set, a ConfigMap and 3 workloads.
func BenchmarkRender(b *testing.B) {
	for _, per := range []int{1, 10, 50} {
		dot := cluster(10, per)
		b.Run(fmt.Sprintf("nodes=%d", 10*per*6), func(b *testing.B) {
			for b.Loop() {
				if _, err := Render(dot); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
