package staging

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// flagdMetrics is /metrics as flagd v0.16's Prometheus exporter writes it
// (labels abridged).
const flagdMetrics = `# HELP feature_flag_flagd_result_reason_total Measures the number of evaluations for a given reason.
# TYPE feature_flag_flagd_result_reason_total counter
feature_flag_flagd_result_reason_total{feature_flag_key="new-ui",feature_flag_provider_name="flagd",feature_flag_reason="STATIC",otel_scope_name="flagd"} 12
feature_flag_flagd_result_reason_total{exception_type="FLAG_NOT_FOUND",feature_flag_provider_name="flagd",feature_flag_reason="ERROR",otel_scope_name="flagd"} 3
feature_flag_flagd_result_reason_total{exception_type="TYPE_MISMATCH",feature_flag_provider_name="flagd",feature_flag_reason="ERROR",otel_scope_name="flagd"} 2
feature_flag_flagd_impression_total{feature_flag_key="new-ui",feature_flag_reason="ERROR"} 99
`

func TestEvaluationErrors(t *testing.T) {
	g := NewWithT(t)
	n, err := EvaluationErrors(strings.NewReader(flagdMetrics))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(5)))
	n, err = EvaluationErrors(strings.NewReader("# nothing evaluated yet\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero())
}

// TestEvaluationErrorsOfAHostileAnswer: a pod's answer is read as
// hostile: NaN, infinities, negative and non-numbers make it unreadable,
// huge counts saturate instead of wrapping, and lines past 1 MiB are
// refused. (Before, NaN and Inf were summed, and two samples of 5e18
// wrapped to a negative total.)
func TestEvaluationErrorsOfAHostileAnswer(t *testing.T) {
	line := func(v string) string {
		return `feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR"} ` + v + "\n"
	}
	for _, tt := range []struct {
		name, metrics string
		want          int64
		err           string
	}{
		{name: "NaN", metrics: line("NaN"), err: "NaN"},
		{name: "+Inf", metrics: line("+Inf"), err: "infinite"},
		{name: "-Inf", metrics: line("-Inf"), err: "negative"},
		{name: "negative", metrics: line("-3"), err: "negative"},
		{name: "not a number", metrics: line("many"), err: "not a number"},
		{name: "two huge samples saturate", metrics: line("5e18") + line("5e18"), want: MaxCount},
		{name: "past int64", metrics: line("1e300"), want: MaxCount},
		{name: "a fraction rounds down", metrics: line("2.9") + line("0.5"), want: 2},
		{name: "no value", metrics: `feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR"}` + "\n", want: 0},
		{name: "a line of 2 MiB", metrics: "# " + strings.Repeat("x", 2<<20) + "\n", err: "longer than 1 MiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			n, err := EvaluationErrors(strings.NewReader(tt.metrics))
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(Equal(tt.want))
		})
	}
}

// FuzzEvaluationErrors: whatever a pod answers, the reader does not panic,
// and a count it gives is never negative.
func FuzzEvaluationErrors(f *testing.F) {
	f.Add(flagdMetrics)
	f.Add(`feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR"} 5e18` + "\n" + `feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR"} 5e18`)
	f.Add(`feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR"} NaN`)
	f.Add(`feature_flag_flagd_result_reason_total{}} 1 2 3`)
	f.Add(`feature_flag_flagd_result_reason_total{feature_flag_reason="ERROR"`)
	f.Fuzz(func(t *testing.T, metrics string) {
		n, err := EvaluationErrors(strings.NewReader(metrics))
		if err == nil && n < 0 {
			t.Fatalf("a negative count %d of %q", n, metrics)
		}
	})
}
