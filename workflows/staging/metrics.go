package staging

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// FlagdErrorMetric is the counter flagd (v0.16) keeps of its evaluation
// results by reason, as its Prometheus exporter names it on the
// management port's /metrics: feature_flag.flagd.result.reason, with the
// reason in the label feature_flag_reason ("ERROR" for an evaluation that
// failed: a flag not found, a type mismatch, a targeting rule that
// errs).
const FlagdErrorMetric = "feature_flag_flagd_result_reason_total"

// EvaluationErrors reads flagd's /metrics (the Prometheus text format) and
// sums its evaluation results of reason ERROR.
func EvaluationErrors(r io.Reader) (int64, error) {
	var n float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, FlagdErrorMetric+"{") || !strings.Contains(line, `feature_flag_reason="ERROR"`) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		fields := strings.Fields(line[end+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, err
		}
		n += v
	}
	return int64(n), sc.Err()
}
