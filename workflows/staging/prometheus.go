package staging

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/flagplane/flagplane/workflows"
)

// The Prometheus gate runs a query that a policy's author writes, with the
// manager's access to Prometheus. Left free, it reads any team's series
// (sum(x{namespace="other-team"})), and its value, echoed into status,
// hands them over. So the manager confines every query before it runs it:
// Prometheus' own parser (the version the e2e suite runs) reads it, and
// every series selector in it, however nested (in a function, a
// subquery, a binary operation, the right side of "or"), is made to
// select only series whose namespace label (NamespaceLabel) is one of the
// namespaces that serve the new revision: the author's own matchers on
// that label are replaced, never trusted. A query that does not parse is
// refused. The value is judged against the gate's max and never written
// out: status and Events say that it passed or failed, not what it was.

// DefaultNamespaceLabel is the label that names a series' namespace, as
// Prometheus' Kubernetes service discovery and kube-state-metrics write it.
const DefaultNamespaceLabel = "namespace"

// namespacesVar is what a query may say for the namespaces that serve the
// new revision (namespace=~"$namespaces"); the confinement puts them in
// whatever the query says.
const namespacesVar = "$namespaces"

// ConfineQuery parses query with Prometheus' parser and returns it with
// every series selector restricted to series whose label is one of
// namespaces (exactly: an anchored alternation of the quoted names). $namespaces,
// anywhere in the query, stands for that alternation. namespaces must not
// be empty: a query over no namespace would run unconfined.
func ConfineQuery(query, label string, namespaces []string) (string, error) {
	if len(namespaces) == 0 {
		return "", errors.New("no namespace to confine the query to")
	}
	if label == "" {
		label = DefaultNamespaceLabel
	}
	alternation := namespacesRegexp(namespaces)
	// In a quoted PromQL string a backslash is escaped; the matcher below
	// replaces whatever the query says of the label anyway.
	expr, err := promQL.ParseExpr(strings.ReplaceAll(query, namespacesVar, strings.ReplaceAll(alternation, `\`, `\\`)))
	if err != nil {
		return "", fmt.Errorf("the query does not parse: %s", cutError(err.Error()))
	}
	confined, err := labels.NewMatcher(labels.MatchRegexp, label, alternation)
	if err != nil {
		return "", fmt.Errorf("confining the query: %w", err)
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			vs.LabelMatchers = append(slices.DeleteFunc(vs.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == label }), confined)
		}
		return nil
	})
	return expr.String(), nil
}

// promQL is Prometheus' parser with its defaults: no experimental function
// (info() among them, which reads series of its own), as a Prometheus
// server runs without feature flags.
var promQL = parser.NewParser(parser.Options{})

// namespacesRegexp is a regular expression that matches exactly the
// namespaces, sorted.
func namespacesRegexp(namespaces []string) string {
	quoted := make([]string, 0, len(namespaces))
	for _, ns := range namespaces {
		quoted = append(quoted, regexp.QuoteMeta(ns))
	}
	slices.Sort(quoted)
	quoted = slices.Compact(quoted)
	return "^(?:" + strings.Join(quoted, "|") + ")$"
}

// ValidateQuery says why a gate's query cannot be run ("" when it can): it
// must parse once $namespaces is set.
func ValidateQuery(query string) string {
	if _, err := ConfineQuery(query, DefaultNamespaceLabel, []string{"checked"}); err != nil {
		return err.Error()
	}
	return ""
}

// cutError shortens a parser's or Prometheus' error, which may quote the query.
func cutError(s string) string { return workflows.Cut(s, 256) }

// PrometheusValue reads the answer of Prometheus' instant query API
// (/api/v1/query): a scalar's value, or the sum of an instant vector's
// samples (0 for an empty vector: nothing matched, nothing failed). NaN
// is an error (a ratio over no traffic: it says nothing either way).
func PrometheusValue(r io.Reader) (float64, error) {
	var answer struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r).Decode(&answer); err != nil {
		return 0, errors.New("not an answer of Prometheus' query API")
	}
	if answer.Status != "success" {
		return 0, fmt.Errorf("the query failed: %s: %s", cutError(answer.ErrorType), cutError(answer.Error))
	}
	sample := func(v []json.RawMessage) (float64, error) {
		if len(v) != 2 {
			return 0, fmt.Errorf("a sample of %d fields", len(v))
		}
		var s string
		if err := json.Unmarshal(v[1], &s); err != nil {
			return 0, errors.New("a sample value that is no string")
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("a sample value that is not a number")
		}
		if math.IsNaN(f) {
			return 0, errors.New("the value is NaN (a ratio over nothing?): it says neither yes nor no")
		}
		return f, nil
	}
	switch answer.Data.ResultType {
	case "scalar":
		var v []json.RawMessage
		if err := json.Unmarshal(answer.Data.Result, &v); err != nil {
			return 0, errors.New("a scalar that is not [time, value]")
		}
		return sample(v)
	case "vector":
		var series []struct {
			Value []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(answer.Data.Result, &series); err != nil {
			return 0, errors.New("a vector that is not a list of samples")
		}
		var sum float64
		for _, s := range series {
			v, err := sample(s.Value)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		if math.IsNaN(sum) {
			// +Inf and -Inf in one vector.
			return 0, errors.New("the value is NaN: it says neither yes nor no")
		}
		return sum, nil
	}
	return 0, fmt.Errorf("the query gives a %q; a gate needs a scalar or an instant vector", cutError(answer.Data.ResultType))
}
