package staging

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestEvaluationErrors(t *testing.T) {
	g := NewWithT(t)
	// As flagd v0.16's Prometheus exporter writes it (labels abridged).
	metrics := `# HELP feature_flag_flagd_result_reason_total Measures the number of evaluations for a given reason.
# TYPE feature_flag_flagd_result_reason_total counter
feature_flag_flagd_result_reason_total{feature_flag_key="new-ui",feature_flag_provider_name="flagd",feature_flag_reason="STATIC",otel_scope_name="flagd"} 12
feature_flag_flagd_result_reason_total{exception_type="FLAG_NOT_FOUND",feature_flag_provider_name="flagd",feature_flag_reason="ERROR",otel_scope_name="flagd"} 3
feature_flag_flagd_result_reason_total{exception_type="TYPE_MISMATCH",feature_flag_provider_name="flagd",feature_flag_reason="ERROR",otel_scope_name="flagd"} 2
feature_flag_flagd_impression_total{feature_flag_key="new-ui",feature_flag_reason="ERROR"} 99
`
	n, err := EvaluationErrors(strings.NewReader(metrics))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(int64(5)))
	n, err = EvaluationErrors(strings.NewReader("# nothing evaluated yet\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero())
}
