package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	table, doc, unexplained := results(&r, deliberate, "v0.16.0", time.Minute, "module m@v1")
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
	// Tests go by name, whatever order chainsaw ended them in.
	if i, j := strings.Index(table, "| flagd-custom-ports |"), strings.Index(table, "| fsconfig-file-sync |"); i < 0 || j < 0 || i > j {
		t.Errorf("the tests are not in the order of their names:\n%s", table)
	}
	// The document's table says the same, without chainsaw's errors of
	// deliberate differences or the time, which change from run to run.
	for _, want := range []string{
		"| flagd-custom-ports | step-01 | fail | deliberate difference: a FeatureFlagSource's port",
		"| fsconfig-flagd-proxy-sync | step-02 | fail | assert: image differs |",
		"1 of 3 tests pass (suite from module m@v1, flagd tag v0.16.0); failures that are deliberate differences: 1.",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document's table lacks %q:\n%s", want, doc)
		}
	}
	for _, unwanted := range []string{"ports differ", "1m0s"} {
		if strings.Contains(doc, unwanted) {
			t.Errorf("the document's table holds %q, which changes from run to run:\n%s", unwanted, doc)
		}
	}
}

// The document's table is rewritten in place, and read back as written.
func TestDocTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	before := "# Title\n\n" + docTableBegin + "\n| old |\n" + docTableEnd + "\n\nafter\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDocTable(path, "| new |\n\n2 of 2 pass.\n"); err != nil {
		t.Fatal(err)
	}
	got, err := readDocTable(path)
	if err != nil || got != "| new |\n\n2 of 2 pass.\n" {
		t.Fatalf("readDocTable = %q, %v", got, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "# Title\n\n") || !strings.HasSuffix(string(data), docTableEnd+"\n\nafter\n") {
		t.Errorf("the rest of the document changed:\n%s", data)
	}
	if err := os.WriteFile(path, []byte("no table\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readDocTable(path); err == nil || !strings.Contains(err.Error(), "has no line") {
		t.Errorf("a document without the table: err = %v", err)
	}
}

// OFO's module, as the Go module proxy serves it, holds the suite and the
// chart that the run reads; the copy is writable. (The download goes
// through the proxy: skipped with -short.)
func TestOFOModule(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads OFO's module")
	}
	dir, err := ofoModule(t.Context(), defaultOFOVersion, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".chainsaw.yaml", "test/e2e/chainsaw/fsconfig-file-sync", "chart/open-feature-operator/values.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the module lacks %s: %v", p, err)
		}
	}
	tag, err := ofoFlagdTag(dir)
	if err != nil || tag != "v0.15.4" {
		t.Errorf("OFO's flagd tag = %q, %v; want v0.15.4", tag, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".chainsaw.yaml"), []byte("x"), 0o644); err != nil {
		t.Errorf("the copy is not writable: %v", err)
	}
	// No Go file: the copy sits under bin/ of this module, where a go.mod
	// would join controller-gen's ./... and a package go's.
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && goFile(d.Name()) {
			t.Errorf("the copy holds %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The admission quantiles are the upper bounds of the buckets that hold
// them, over the label sets of the webhook's pod CREATE admissions only.
func TestAdmissionQuantiles(t *testing.T) {
	const metrics = `# HELP apiserver_admission_webhook_admission_duration_seconds x
apiserver_admission_webhook_admission_duration_seconds_bucket{name="w",operation="CREATE",rejected="false",type="admit",le="0.005"} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{name="w",operation="CREATE",rejected="false",type="admit",le="0.025"} 60
apiserver_admission_webhook_admission_duration_seconds_bucket{name="w",operation="CREATE",rejected="false",type="admit",le="0.1"} 99
apiserver_admission_webhook_admission_duration_seconds_bucket{name="w",operation="CREATE",rejected="false",type="admit",le="+Inf"} 100
apiserver_admission_webhook_admission_duration_seconds_bucket{name="w",operation="UPDATE",rejected="false",type="admit",le="+Inf"} 500
apiserver_admission_webhook_admission_duration_seconds_bucket{name="other",operation="CREATE",rejected="false",type="admit",le="+Inf"} 7
apiserver_admission_webhook_admission_duration_seconds_count{name="w",operation="CREATE",rejected="true",type="admit"} 3
apiserver_admission_webhook_admission_duration_seconds_count{name="w",operation="CREATE",rejected="false",type="admit"} 100
`
	n, p50, p99 := admissionQuantiles(metrics, "w")
	if n != 100 || p50 != 0.025 || p99 != 0.1 {
		t.Errorf("admissionQuantiles = %d, %v, %v; want 100, 0.025, 0.1", n, p50, p99)
	}
	if r := admissionsRefused(metrics, "w"); r != 3 {
		t.Errorf("admissionsRefused = %d, want 3", r)
	}
	if n, _, _ := admissionQuantiles(metrics, "none"); n != 0 {
		t.Errorf("a webhook without admissions: %d", n)
	}
}
