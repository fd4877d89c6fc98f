package staging

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
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

// MaxCount is the largest count a gate adds up: counts saturate there
// (AddCounts), so that no total wraps around and hides errors, and a
// count read that is larger is one too.
const MaxCount = math.MaxInt64

// EvaluationErrors reads flagd's /metrics (the Prometheus text format) and
// sums its evaluation results of reason ERROR. The answer is a tenant's
// pod's, so it is read as hostile: a sample that is not a non-negative
// finite number (NaN, Inf, negative, not a number) makes the whole answer
// unreadable, a sum past MaxCount saturates, and a line longer than 1 MiB
// is an error.
func EvaluationErrors(r io.Reader) (int64, error) {
	var n int64
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
		v, err := Count(fields[0])
		if err != nil {
			return 0, fmt.Errorf("%s: %w", FlagdErrorMetric, err)
		}
		n = AddCounts(n, v)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return 0, errors.New("a line of the metrics is longer than 1 MiB")
		}
		return 0, err
	}
	return n, nil
}

// Count reads a counter's sample: a non-negative, finite number, as an
// integer (a fraction rounds down; past MaxCount it is MaxCount).
func Count(s string) (int64, error) {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, errors.New("a sample that is not a number")
	case math.IsNaN(v):
		return 0, errors.New("a sample that is NaN")
	case math.IsInf(v, 0) || v >= math.MaxInt64:
		if v < 0 {
			return 0, errors.New("a negative sample")
		}
		if math.IsInf(v, 1) {
			return 0, errors.New("a sample that is infinite")
		}
		return MaxCount, nil
	case v < 0:
		return 0, errors.New("a negative sample")
	}
	return int64(v), nil
}

// AddCounts adds two counts, saturating at MaxCount; a negative count
// (none is made here) counts as 0.
func AddCounts(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > MaxCount-b {
		return MaxCount
	}
	return a + b
}
