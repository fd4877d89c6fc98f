package admissionfuzz

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TimingsEnv names the file that fuzz workers append their longest
// admissions to (see Timings).
const TimingsEnv = "FLAGPLANE_FUZZ_TIMINGS"

// Timeout is the time the API server gives flagplane's webhooks
// (timeoutSeconds in config/webhook): an answer later than this is none,
// and the request fails. It is the only time a test asserts: machines are
// noisy, and this is the real limit. Work done in the test's own process
// is held to it in CPU time (Cost.Over), which another process's load
// does not stretch as it does wall time: beside make test's other steps,
// an input that takes 1.1 to 1.7 s alone once took 6 s of wall time.
const Timeout = 5 * time.Second

// Timings keeps the longest admission seen per path (a webhook, a kind
// the API server validates), with a description of its input. It is safe
// for concurrent use. The zero value is ready.
type Timings struct {
	mu      sync.Mutex
	longest map[string]Timing
}

// Timing is one admission: what it cost, and of what input.
type Timing struct {
	Cost
	Input string
}

// Cost is what running a piece of work took: its wall time, and the CPU
// time the whole process spent meanwhile (every thread's, the garbage
// collector's among them).
type Cost struct {
	Wall, CPU time.Duration
}

// Over tells whether work done in this process went past Timeout: its
// CPU time did. Its wall time may have on a machine busy with other
// processes, which says nothing of the code.
func (c Cost) Over() bool {
	if c.CPU == 0 { // the system did not say
		return c.Wall > Timeout
	}
	return c.CPU > Timeout
}

func (c Cost) String() string {
	return fmt.Sprintf("%v (CPU %v)", c.Wall.Round(time.Microsecond), c.CPU.Round(time.Microsecond))
}

// Observe records that path cost c on input, ordered by wall time. A new
// longest for path is appended to the file named by
// FLAGPLANE_FUZZ_TIMINGS, when set, as "path<TAB>nanoseconds<TAB>input".
func (t *Timings) Observe(path string, c Cost, input string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.longest == nil {
		t.longest = map[string]Timing{}
	}
	if c.Wall <= t.longest[path].Wall {
		return
	}
	t.longest[path] = Timing{Cost: c, Input: input}
	if name := os.Getenv(TimingsEnv); name != "" {
		appendLine(name, fmt.Sprintf("%s\t%d\t%s\n", path, c.Wall.Nanoseconds(), oneLine(input)))
	}
}

// Time runs f and records what it cost under path.
func (t *Timings) Time(path, input string, f func()) Cost {
	c := Measure(f)
	t.Observe(path, c, input)
	return c
}

// Measure runs f and returns what it cost. The CPU time is the process's,
// so it is f's only while nothing else of the process runs.
func Measure(f func()) Cost {
	cpu0, start := processCPU(), time.Now()
	f()
	return Cost{Wall: time.Since(start), CPU: processCPU() - cpu0}
}

// processCPU is the CPU time the process has used, user and system, or 0
// where the system does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
		fmt.Fprintf(&b, "longest admission: %s: %v (%s)\n", path, l.Cost, l.Input)
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
