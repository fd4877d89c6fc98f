package admissionfuzz

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// TimingsEnv names the file that fuzz workers append their longest
// admissions to (see Timings).
const TimingsEnv = "FLAGPLANE_FUZZ_TIMINGS"

// Timeout is the time the API server gives flagplane's webhooks
// (timeoutSeconds in config/webhook): an answer later than this is none,
// and the request fails. It is the only time a test asserts: machines are
// noisy, and this is the real limit.
const Timeout = 5 * time.Second

// Timings keeps the longest admission seen per path (a webhook, a kind
// the API server validates), with a description of its input. It is safe
// for concurrent use. The zero value is ready.
type Timings struct {
	mu      sync.Mutex
	longest map[string]Timing
}

// Timing is one admission: how long it took, and of what input.
type Timing struct {
	Took  time.Duration
	Input string
}

// Observe records that path took d on input. A new longest for path is
// appended to the file named by FLAGPLANE_FUZZ_TIMINGS, when set, as
// "path<TAB>nanoseconds<TAB>input".
func (t *Timings) Observe(path string, d time.Duration, input string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.longest == nil {
		t.longest = map[string]Timing{}
	}
	if d <= t.longest[path].Took {
		return
	}
	t.longest[path] = Timing{Took: d, Input: input}
	if name := os.Getenv(TimingsEnv); name != "" {
		appendLine(name, fmt.Sprintf("%s\t%d\t%s\n", path, d.Nanoseconds(), oneLine(input)))
	}
}

// Time runs f and records how long it took under path.
func (t *Timings) Time(path, input string, f func()) time.Duration {
	start := time.Now()
	f()
	d := time.Since(start)
	t.Observe(path, d, input)
	return d
}

// Longest is the longest admission seen on path.
func (t *Timings) Longest(path string) Timing {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.longest[path]
}

// Report says the longest admission of each path, one per line.
func (t *Timings) Report() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for _, path := range slices.Sorted(maps.Keys(t.longest)) {
		l := t.longest[path]
		fmt.Fprintf(&b, "longest admission: %s: %v (%s)\n", path, l.Took.Round(time.Microsecond), l.Input)
	}
	return b.String()
}

// Describe names an input for a report: the test (or seed) that ran it,
// its size and how it starts.
func Describe(name string, raw []byte) string {
	return fmt.Sprintf("%s, %d bytes: %.60q", name, len(raw), raw)
}

func appendLine(name, line string) {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return // a report is best effort: the test itself judges
	}
	defer f.Close()
	_, _ = f.WriteString(line)
}

// oneLine keeps a description on its line of the timings file.
func oneLine(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}
