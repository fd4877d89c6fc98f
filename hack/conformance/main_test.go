package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestResults reads a chainsaw JSON report: a failure of a listed step is
// a deliberate difference, any other failure is not, and a listed step
// that passes is pointed out.
func TestResults(t *testing.T) {
	const sample = `{"tests": [
	  {"name": "fsconfig-file-sync", "steps": [{"name": "step-00", "operations": [{"type": "apply"}]}]},
	  {"name": "flagd-custom-ports", "steps": [{"name": "step-00", "operations": [{"type": "apply"}]},
	    {"name": "step-01", "operations": [{"type": "assert", "failure": {"error": "ports differ\nmore"}}]}]},
	  {"name": "fsconfig-flagd-proxy-sync", "steps": [{"name": "step-01", "operations": [{"type": "command"}]},
	    {"name": "step-02", "operations": [{"type": "assert", "failure": {"error": "image differs"}}]}]}
	]}`
	var r report
	if err := json.Unmarshal([]byte(sample), &r); err != nil {
		t.Fatal(err)
	}
	table, unexplained := results(&r, "v0.16.0", time.Minute)
	if len(unexplained) != 1 || unexplained[0] != "fsconfig-flagd-proxy-sync" {
		t.Errorf("unexplained = %v, want the flagd-proxy test, whose failing step is not a listed one", unexplained)
	}
	for _, want := range []string{
		"| flagd-custom-ports | step-01 | fail | deliberate difference: ",
		"chainsaw: assert: ports differ …",
		"| fsconfig-flagd-proxy-sync | step-01 | pass | listed as a deliberate difference, yet it passed |",
		"| fsconfig-flagd-proxy-sync | step-02 | fail | assert: image differs |",
		"1 of 3 tests passed in 1m0s (failures that are deliberate differences: 1)",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}
