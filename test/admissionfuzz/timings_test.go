package admissionfuzz

import (
	"testing"
	"time"
)

// Work that waits (as this process does while other processes have the
// cores) costs wall time and next to no CPU time; work that computes
// costs CPU time.
func TestMeasureTellsWaitingFromWork(t *testing.T) {
	waited := Measure(func() { time.Sleep(300 * time.Millisecond) })
	if waited.Wall < 300*time.Millisecond {
		t.Errorf("slept 300ms, measured %v of wall time", waited.Wall)
	}
	if waited.CPU >= 150*time.Millisecond {
		t.Errorf("slept 300ms, measured %v of CPU time", waited.CPU)
	}

	// A fixed amount of work: its CPU time does not depend on the
	// machine's load, as its wall time would.
	worked := Measure(func() {
		for i := range 300_000_000 {
			sink ^= uint64(i) * 0x9e3779b97f4a7c15
		}
	})
	if worked.CPU < 30*time.Millisecond {
		t.Errorf("300 million multiplications measured %v of CPU time (wall %v)", worked.CPU, worked.Wall)
	}
}

var sink uint64

func TestOverJudgesCPUTime(t *testing.T) {
	for _, c := range []struct {
		cost Cost
		over bool
	}{
		{Cost{Wall: 6 * time.Second, CPU: 1500 * time.Millisecond}, false}, // a busy machine
		{Cost{Wall: 6 * time.Second, CPU: 6 * time.Second}, true},
		{Cost{Wall: 3 * time.Second, CPU: 6 * time.Second}, true}, // on two cores
		{Cost{Wall: 6 * time.Second}, true},                       // no CPU time known: the wall time judges
		{Cost{Wall: time.Second}, false},
	} {
		if got := c.cost.Over(); got != c.over {
			t.Errorf("%v: Over() = %v, want %v", c.cost, got, c.over)
		}
	}
}
