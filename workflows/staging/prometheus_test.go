package staging

import (
	"math"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestConfineQuery: every series selector of a query, however nested, is
// confined to the namespaces that serve the new revision, whatever the
// author wrote about the namespace label. (Before, the query ran as
// written: sum(x{namespace="other-team"}) read another team's series.)
func TestConfineQuery(t *testing.T) {
	const in = `namespace=~"^(?:canary|shop\\.eu)$"`
	for _, tt := range []struct{ name, query, want string }{
		{"$namespaces, as documented", `sum(rate(errors_total{namespace=~"$namespaces"}[1m]))`,
			`sum(rate(errors_total{` + in + `}[1m]))`},
		{"another team's namespace", `sum(errors_total{namespace="other-team"})`, `sum(errors_total{` + in + `})`},
		{"no namespace matcher", `sum(errors_total)`, `sum(errors_total{` + in + `})`},
		{"a negative matcher", `sum(errors_total{namespace!="canary"})`, `sum(errors_total{` + in + `})`},
		{"the right side of or", `sum(a{namespace=~"$namespaces"}) or sum(b{namespace="other-team"})`,
			`sum(a{` + in + `}) or sum(b{` + in + `})`},
		{"a subquery and a binary operation", `max_over_time(rate(x{namespace="x"}[1m])[5m:1m]) / on() group_left() y`,
			`max_over_time(rate(x{` + in + `}[1m])[5m:1m]) / on () group_left () y{` + in + `}`},
		{"a name in the selector", `{__name__="errors_total", namespace="kube-system"}`, `{__name__="errors_total",` + in + `}`},
		{"numbers only", `vector(0)`, `vector(0)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ConfineQuery(tt.query, "", []string{"shop.eu", "canary"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	got, err := ConfineQuery(`sum(x{kubernetes_namespace="a"})`, "kubernetes_namespace", []string{"b"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(`sum(x{kubernetes_namespace=~"^(?:b)$"})`), "another label, as the manager's flag names it")
	_, err = ConfineQuery(`sum(x`, "", []string{"a"})
	g.Expect(err).To(MatchError(ContainSubstring("the query does not parse")))
	_, err = ConfineQuery(`sum(x)`, "", nil)
	g.Expect(err).To(MatchError(ContainSubstring("no namespace")))
	_, err = ConfineQuery(`info(x)`, "", []string{"a"})
	g.Expect(err).To(HaveOccurred(), "an experimental function is refused, as a Prometheus without feature flags refuses it")
	g.Expect(ValidateQuery(`sum(x{namespace=~"$namespaces"}) or vector(0)`)).To(BeEmpty())
	g.Expect(ValidateQuery(`sum(`)).To(ContainSubstring("does not parse"))
}

// FuzzConfineQuery: whatever a policy's author writes, a query that
// parses comes out with every selector confined, and parses again.
func FuzzConfineQuery(f *testing.F) {
	for _, q := range []string{`sum(rate(errors_total{namespace=~"$namespaces"}[1m]))`, `a or b{namespace="x"}`,
		`max_over_time(rate(x[1m])[5m:1m])`, `label_replace(x, "namespace", "y", "", "")`, `{__name__=~".+"}`, `vector(0)`} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		got, err := ConfineQuery(query, "", []string{"canary"})
		if err != nil {
			return
		}
		expr, err := promQL.ParseExpr(got)
		if err != nil {
			t.Fatalf("%q confined to %q, which does not parse: %v", query, got, err)
		}
		for _, s := range selectors(expr) {
			if !strings.Contains(s, `namespace=~"^(?:canary)$"`) || strings.Count(s, "namespace") != 1 {
				t.Fatalf("%q confined to %q: selector %s", query, got, s)
			}
		}
	})
}

func TestPrometheusValue(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       float64
		err        string
	}{
		{name: "a vector sums", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1700000000.1,"2"]},{"metric":{"a":"2"},"value":[1700000000.1,"0.5"]}]}}`, want: 2.5},
		{name: "an empty vector", body: `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{name: "a scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"7"]}}`, want: 7},
		{name: "+Inf", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}`, want: posInf},
		{name: "NaN says nothing", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`, err: "NaN"},
		{name: "+Inf and -Inf", body: `{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"+Inf"]},{"value":[1,"-Inf"]}]}}`, err: "NaN"},
		{name: "an error", body: `{"status":"error","errorType":"bad_data","error":"parse error at char 4"}`, err: "the query failed: bad_data: parse error"},
		{name: "a matrix", body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`, err: "scalar or an instant vector"},
		{name: "not JSON", body: `<html>`, err: "not an answer"},
		{name: "a sample of one field", body: `{"status":"success","data":{"resultType":"scalar","result":[1]}}`, err: "1 fields"},
		{name: "a number for a string", body: `{"status":"success","data":{"resultType":"scalar","result":[1,2]}}`, err: "no string"},
		{name: "a long error is cut", body: `{"status":"error","errorType":"x","error":"` + strings.Repeat("e", 5000) + `"}`, err: "..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := PrometheusValue(strings.NewReader(tt.body))
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				g.Expect(len(err.Error())).To(BeNumerically("<", 600))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal(tt.want))
		})
	}
}

// FuzzPrometheusValue: whatever a Prometheus (or what claims to be one)
// answers, the reader does not panic, never gives NaN, and its errors
// stay short.
func FuzzPrometheusValue(f *testing.F) {
	f.Add(`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2"]}]}}`)
	f.Add(`{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`)
	f.Add(`{"status":"error","errorType":"x","error":"y"}`)
	f.Add(`{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}`)
	f.Fuzz(func(t *testing.T, body string) {
		v, err := PrometheusValue(strings.NewReader(body))
		if err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("an error of %d bytes", len(err.Error()))
			}
			return
		}
		if v != v {
			t.Fatalf("NaN from %q", body)
		}
	})
}

var posInf = math.Inf(1)

// selectors lists the series selectors of an expression, printed.
func selectors(expr parser.Expr) []string {
	var out []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			out = append(out, vs.String())
		}
		return nil
	})
	return out
}
