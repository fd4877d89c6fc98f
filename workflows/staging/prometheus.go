package staging

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// PrometheusQuery is a Prometheus gate's query for the namespaces that
// serve the new revision: $namespaces becomes a regular expression that
// matches exactly them, for a label matcher such as
// namespace=~"$namespaces".
func PrometheusQuery(query string, namespaces []string) string {
	quoted := make([]string, 0, len(namespaces))
	for _, ns := range namespaces {
		quoted = append(quoted, regexp.QuoteMeta(ns))
	}
	slices.Sort(quoted)
	return strings.ReplaceAll(query, "$namespaces", "^(?:"+strings.Join(quoted, "|")+")$")
}

// PrometheusValue reads the answer of Prometheus' instant query API
// (/api/v1/query): a scalar's value, or the sum of an instant vector's
// samples (0 for an empty vector: nothing matched, nothing failed).
func PrometheusValue(body []byte) (float64, error) {
	var answer struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return 0, fmt.Errorf("not an answer of Prometheus' query API: %w", err)
	}
	if answer.Status != "success" {
		return 0, fmt.Errorf("the query failed: %s: %s", answer.ErrorType, answer.Error)
	}
	sample := func(v []any) (float64, error) {
		if len(v) != 2 {
			return 0, fmt.Errorf("a sample of %d fields", len(v))
		}
		s, ok := v[1].(string)
		if !ok {
			return 0, fmt.Errorf("a sample value that is no string")
		}
		return strconv.ParseFloat(s, 64)
	}
	switch answer.Data.ResultType {
	case "scalar":
		var v []any
		if err := json.Unmarshal(answer.Data.Result, &v); err != nil {
			return 0, err
		}
		return sample(v)
	case "vector":
		var series []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(answer.Data.Result, &series); err != nil {
			return 0, err
		}
		var sum float64
		for _, s := range series {
			v, err := sample(s.Value)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}
	return 0, fmt.Errorf("the query gives a %s; a gate needs a scalar or an instant vector", answer.Data.ResultType)
}
