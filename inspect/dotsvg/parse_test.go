package dotsvg

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	g := NewWithT(t)
	gr, err := parse([]byte(`/* made by hand */
strict digraph "topo logy" {
  rankdir=LR; // as topology.DOT
  node [fontsize=10, shape=box];
  "a" [label="A\nfirst"];
  edge [style=dashed]
  a -> b -> "c \"quoted\"" [label=x, color="#38761d"];
# a preprocessor line
  b [shape=note] [style=filled];
  d
}
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gr.name).To(Equal("topo logy"))
	g.Expect(gr.attrs).To(Equal(map[string]string{"rankdir": "LR"}))
	ids := []string{}
	for _, n := range gr.nodes {
		ids = append(ids, n.id)
	}
	g.Expect(ids).To(Equal([]string{"a", "b", `c "quoted"`, "d"}))
	g.Expect(gr.byID["a"].attrs).To(Equal(map[string]string{"fontsize": "10", "shape": "box", "label": `A\nfirst`}))
	g.Expect(gr.byID["b"].attrs).To(Equal(map[string]string{"fontsize": "10", "shape": "note", "style": "filled"}))
	g.Expect(gr.edges).To(HaveLen(2))
	g.Expect(gr.edges[1].from.id).To(Equal("b"))
	g.Expect(gr.edges[1].to.id).To(Equal(`c "quoted"`))
	g.Expect(gr.edges[1].attrs).To(Equal(map[string]string{"style": "dashed", "label": "x", "color": "#38761d"}))
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct{ dot, want string }{
		{`graph { a -- b }`, "DOT line 1: an undirected graph: only digraphs are drawn"},
		{`digraph { a -- b }`, `an undirected edge "--" in a digraph`},
		{`digraph { subgraph cluster_x { a } }`, "subgraphs are not drawn"},
		{`digraph { { a b } }`, "subgraphs are not drawn"},
		{`digraph { a -> { b c } }`, "subgraphs are not drawn"},
		{`digraph { a:p -> b }`, "node ports are not drawn"},
		{`digraph { a [label=<<b>x</b>>] }`, "HTML-like labels are not drawn"},
		{"digraph {\n a [label=\"x]\n}", `DOT line 3: a quoted string is not closed`},
		{`digraph { a }}`, `"}" after the end of the graph`},
		{`digraph { a`, `the graph is not closed with "}"`},
		{`digraph { a [label] }`, `expected "=", found "]"`},
		{`digraph { a -> }`, `expected a node after "->", found "}"`},
		{`digraph { a /* b }`, "a /* comment is not closed"},
		{`digraph { a @ }`, `unexpected '@'`},
		{``, `expected "digraph", found the end of the input`},
	} {
		t.Run(tt.dot, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Render([]byte(tt.dot))
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

func TestLabel(t *testing.T) {
	g := NewWithT(t)
	l := parseLabel(`Deployment\nshop/shop-web`, "deployment:shop/shop-web", "topology", 10)
	g.Expect(l.lines).To(Equal([]line{{"Deployment", "middle"}, {"shop/shop-web", "middle"}}))
	// Helvetica's widths, as Graphviz measures shop/shop-web: 67.81pt
	g.Expect(l.w).To(BeNumerically("~", 67.81, 0.001))
	g.Expect(l.h).To(BeNumerically("~", 24, 0.001))

	l = parseLabel(`\N in \G\lright\rback\\slash`, "n1", "g", 14)
	g.Expect(l.lines).To(Equal([]line{{"n1 in g", "start"}, {"right", "end"}, {`back\slash`, "middle"}}))

	g.Expect(parseLabel("", "n", "g", 10).lines).To(BeEmpty())
	g.Expect(textWidth("漢字", 10)).To(Equal(20.0))
}
