package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testdata/gotest.json is go test -count=1 -json ./... of a module of four
// packages: broken (its test does not compile), fail (one test passes, one
// fails), notests (no test files) and pass (a test with a subtest, which
// prints a line and logs another).
const stream = "testdata/gotest.json"

// TestMain runs the command itself when asked to, for TestCommand.
func TestMain(m *testing.M) {
	if os.Getenv("TESTTIMES_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func readStream(t *testing.T, keep func(line string) bool) string {
	t.Helper()
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line != "" && (keep == nil || keep(line)) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// record runs a recorder on in and returns what it wrote, the rows it
// saved and whether every package passed.
func record(t *testing.T, in string, verbose, stream bool) (string, []row, bool) {
	t.Helper()
	var out bytes.Buffer
	var rows []row
	r := recorder{out: bufio.NewWriter(&out), step: "test-unit", verbose: verbose, stream: stream,
		save: func(r row) error { rows = append(rows, r); return nil }}
	ok, err := r.run(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), rows, ok
}

func results(rows []row) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.pkg+" "+r.result+" "+time.Duration(r.seconds*float64(time.Second)).String())
	}
	return strings.Join(s, "\n")
}

// TestRecord: the output is what go test without -json prints, the Output
// fields verbatim (all of a failing package's, the last line of a passing
// one's, a build's at once); every package has its row; a failure is told.
func TestRecord(t *testing.T) {
	out, rows, ok := record(t, readStream(t, nil), false, false)
	want := "# example.com/fake/broken [example.com/fake/broken.test]\n" +
		"broken/broken_test.go:5:33: undefined: undefined\n" +
		"FAIL\texample.com/fake/broken [build failed]\n" +
		"=== RUN   TestGood\n" +
		"--- PASS: TestGood (0.00s)\n" +
		"=== RUN   TestBad\n" +
		"    fail_test.go:7: want 2, got 3\n" +
		"--- FAIL: TestBad (0.00s)\n" +
		"FAIL\n" +
		"FAIL\texample.com/fake/fail\t0.003s\n" +
		"?   \texample.com/fake/notests\t[no test files]\n" +
		"ok  \texample.com/fake/pass\t0.318s\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	wantRows := "example.com/fake/broken build failed 0s\n" +
		"example.com/fake/fail \"    fail_test.go:7: want 2, got 3\\n--- FAIL: TestBad (0.00s)\" 0s\n" +
		"example.com/fake/fail FAIL 4ms\n" +
		"example.com/fake/notests no tests 0s\n" +
		"example.com/fake/pass ok 318ms"
	if got := results(rows); got != wantRows {
		t.Errorf("rows:\n%s\nwant:\n%s", got, wantRows)
	}
	if ok {
		t.Error("ok with a package that failed and one that did not build")
	}

	_, _, ok = record(t, readStream(t, func(line string) bool { return strings.Contains(line, "fake/pass") }), false, false)
	if !ok {
		t.Error("not ok with one package, which passed")
	}
}

// TestRecordVerbose: -v writes every package's output, each package's
// together; -stream every line as it comes.
func TestRecordVerbose(t *testing.T) {
	out, _, _ := record(t, readStream(t, nil), true, false)
	for _, want := range []string{
		"=== RUN   TestSum\na line the suite prints\n=== RUN   TestSum/small\n    pass_test.go:11: logged\n" +
			"--- PASS: TestSum/small (0.20s)\n--- PASS: TestSum (0.20s)\nPASS\nok  \texample.com/fake/pass\t0.318s\n",
		"--- FAIL: TestBad (0.00s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("-v output lacks %q:\n%s", want, out)
		}
	}

	out, rows, ok := record(t, readStream(t, nil), false, true)
	var want strings.Builder
	for _, line := range strings.Split(readStream(t, nil), "\n") {
		if e, err := parseEvent(line); err == nil {
			want.WriteString(e.Output)
		}
	}
	if out != want.String() {
		t.Errorf("-stream output:\n%s\nwant every Output field in order:\n%s", out, want.String())
	}
	if len(rows) != 4 || ok {
		t.Errorf("-stream: %d rows, ok %v; want 4 rows, not ok", len(rows), ok)
	}
}

// TestRecordUnfinished: output cut short (go test killed) leaves a package
// unfinished: its output so far is written, and it is a failure.
func TestRecordUnfinished(t *testing.T) {
	in := readStream(t, func(line string) bool { return strings.Contains(line, "fake/pass") })
	cut, _, found := strings.Cut(in, `"Output":"--- PASS: TestSum/small`)
	if !found {
		t.Fatal("no --- PASS line of TestSum/small in the stream")
	}
	in = cut[:strings.LastIndex(cut, "\n")+1]
	out, rows, ok := record(t, in, false, false)
	if want := "a line the suite prints\n=== RUN   TestSum/small\n    pass_test.go:11: logged\ntesttimes: example.com/fake/pass did not finish\n"; !strings.HasSuffix(out, want) {
		t.Errorf("output:\n%s\nwant it to end with:\n%s", out, want)
	}
	if got, want := results(rows), "example.com/fake/pass unfinished 116.377335ms"; got != want || ok {
		t.Errorf("rows %q, ok %v; want %q, not ok", got, ok, want)
	}
}

// TestRecordOtherLines: lines that are not events are passed on at once.
func TestRecordOtherLines(t *testing.T) {
	in := "go: downloading example.com/x v1.0.0\n" + readStream(t, func(line string) bool { return strings.Contains(line, "fake/notests") }) + "{not an event\nno newline"
	out, _, ok := record(t, in, false, false)
	if want := "go: downloading example.com/x v1.0.0\n?   \texample.com/fake/notests\t[no test files]\n{not an event\nno newline"; out != want || !ok {
		t.Errorf("output %q, ok %v; want %q, ok", out, ok, want)
	}
}

func parseEvent(line string) (event, error) {
	var e event
	err := json.Unmarshal([]byte(line), &e)
	return e, err
}

// TestCommand runs the command: record exits with status 1 when a package
// failed and 0 when all passed, and print prints the packages it recorded,
// slowest first.
func TestCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bin", "test-times.tsv")
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "TESTTIMES_TEST_MAIN=1", runEnv+"=1700000000000000000")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var exit *exec.ExitError
	if _, err := run(readStream(t, nil), "record", "-file", file, "-step", "test-unit"); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("record of a failing stream: %v, want exit status 1", err)
	}
	passing := readStream(t, func(line string) bool { return strings.Contains(line, "fake/pass") })
	if out, err := run(passing, "record", "-file", file, "-step", "fuzz-short:FuzzX"); err != nil {
		t.Errorf("record of a passing stream: %v\n%s", err, out)
	}
	out, err := run("", "print", "-file", file)
	if err != nil {
		t.Fatal(err, out)
	}
	want := ">> test times (" + file + ")\n" +
		">> packages, slowest first (go test's time of each: its tests' run, not its build)\n" +
		"   time  result        step              package\n" +
		"   0.3s  ok            fuzz-short:FuzzX  example.com/fake/pass\n" +
		"   0.3s  ok            test-unit         example.com/fake/pass\n" +
		"   0.0s  FAIL          test-unit         example.com/fake/fail\n" +
		"   0.0s  build failed  test-unit         example.com/fake/broken\n" +
		"   packages without test files: 1\n" +
		">> why example.com/fake/fail failed (test-unit)\n" +
		"       fail_test.go:7: want 2, got 3\n" +
		"   --- FAIL: TestBad (0.00s)\n"
	if out != want {
		t.Errorf("print:\n%s\nwant:\n%s", out, want)
	}
}

// TestFailureExcerpt: of a Ginkgo suite's verbose output, in color, the
// excerpt is each [FAILED] block to the line that places it, once, without
// color, and the --- FAIL line; not the passing specs' lines.
func TestFailureExcerpt(t *testing.T) {
	red, plain := "\x1b[38;5;9m\x1b[1m", "\x1b[0m"
	output := []string{
		"=== RUN   TestSuite\n",
		"  STEP: deleting the FeatureFlag @ 11/29/26 22:49:22.515\n",
		"\u2022 [PASSED] a spec that passed\n",
		"  " + red + "[FAILED] in [It] - /src/delivery_test.go:48 @ 11/29/26 22:51:30" + plain + "\n",
		red + "\u2022 [FAILED] [120.001 seconds]" + plain + "\n",
		"  " + red + "[FAILED] Timed out after 120.001s.\n",
		"  the real kubelet says it cannot refresh the volume\n",
		"  Expected\n      <[]v1.Event | len:0, cap:0>: []\n  to contain element matching\n      <*matchers.AndMatcher>\n" + plain,
		"  In [It] at: /src/delivery_test.go:48 @ 11/29/26 22:51:30\n",
		"------------------------------\n",
		"Summarizing 1 Failure:\n",
		"  [FAIL] delivery on a real node [It] file: ...\n",
		"--- FAIL: TestSuite (346.24s)\n",
		"FAIL\n",
	}
	got := failureExcerpt(output)
	want := "  [FAILED] Timed out after 120.001s.\n" +
		"  the real kubelet says it cannot refresh the volume\n" +
		"  Expected\n      <[]v1.Event | len:0, cap:0>: []\n  to contain element matching\n      <*matchers.AndMatcher>\n" +
		"  In [It] at: /src/delivery_test.go:48 @ 11/29/26 22:51:30\n" +
		"--- FAIL: TestSuite (346.24s)"
	if got != want {
		t.Errorf("excerpt:\n%s\nwant:\n%s", got, want)
	}
	if got := failureExcerpt([]string{"flag provided but not defined: -ginkgo.v\n", "Usage of /tmp/x.test:\n", "  -test.v\n"}); got != "flag provided but not defined: -ginkgo.v" {
		t.Errorf("excerpt of a plain test given Ginkgo's flags: %q", got)
	}
	if got := failureExcerpt([]string{"ok  \texample.com/fake/pass\t0.318s\n"}); got != "" {
		t.Errorf("excerpt of output that names no failure: %q, want none", got)
	}
}

// TestPrintTable: steps in the order they started, each with its wall
// time from the end of the one before, and the prerequisites' part of it.
func TestPrintTable(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	run := "1767322800000000000" // start
	rows := []row{
		{run: run, kind: "start", step: "vet", at: at(20 * time.Second)},
		{run: run, kind: "end", step: "vet", at: at(61 * time.Second)},
		{run: run, kind: "start", step: "test-unit", at: at(61 * time.Second)},
		{run: run, kind: "pkg", step: "test-unit", pkg: "m/webhooks", result: "ok", seconds: 82.14, at: at(200 * time.Second)},
		{run: run, kind: "pkg", step: "test-unit", pkg: "m/api", result: "ok", seconds: 2.29, at: at(210 * time.Second)},
		{run: run, kind: "pkg", step: "test-unit", pkg: "m/api/v1", result: "no tests", at: at(210 * time.Second)},
		{run: run, kind: "end", step: "test-unit", at: at(300 * time.Second)},
		{run: run, kind: "start", step: "test-integration", at: at(700 * time.Second)},
		{run: run, kind: "pkg", step: "test-integration", pkg: "m/test/install", result: "FAIL", seconds: 101.04, at: at(900 * time.Second)},
	}
	var out bytes.Buffer
	printTable(&out, "bin/test-times.tsv", rows, at(1000*time.Second), false)
	want := `>> test times (bin/test-times.tsv)
   step              result        wall  prerequisites
   vet               ok           1m01s            20s
   test-unit         ok           3m59s             0s
   test-integration  unfinished  10m00s          6m40s
   total                         15m00s
>> packages, slowest first (go test's time of each: its tests' run, not its build)
     time  result  step              package
   101.0s  FAIL    test-integration  m/test/install
    82.1s  ok      test-unit         m/webhooks
     2.3s  ok      test-unit         m/api
   packages without test files: 1
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}

	// Stopped: the unfinished step counts to now; and when make stopped
	// after a step's end, before the next one's recipe, so does the time
	// since.
	out.Reset()
	printTable(&out, "f", rows, at(1000*time.Second), true)
	if want := "   test-integration  stopped  11m40s          6m40s\n   total                      16m40s\n"; !strings.Contains(out.String(), want) {
		t.Errorf("stopped table:\n%s\nwant it to hold:\n%s", out.String(), want)
	}
	out.Reset()
	printTable(&out, "f", rows[:7], at(400*time.Second), true)
	if want := "   (after test-unit)  stopped  1m40s\n   total                       6m40s\n"; !strings.Contains(out.String(), want) {
		t.Errorf("stopped table:\n%s\nwant it to hold:\n%s", out.String(), want)
	}
}

// TestPrintTableSideBySide: make test's steps run side by side, each
// counted from its own start; a step whose recipe failed ends when it
// failed; and when make stopped, the time after the latest end is its own
// row.
func TestPrintTableSideBySide(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	run := "1767322800000000000" // start
	rows := []row{
		{run: run, kind: "start", step: "vet", at: at(0)},
		{run: run, kind: "end", step: "vet", at: at(60 * time.Second)},
		{run: run, kind: "start", step: "conformance", at: at(90 * time.Second)},
		{run: run, kind: "start", step: "test-integration", at: at(90 * time.Second)},
		{run: run, kind: "start", step: "test-unit", at: at(90 * time.Second)},
		{run: run, kind: "failed", step: "conformance", at: at(150 * time.Second)},
		{run: run, kind: "end", step: "test-unit", at: at(390 * time.Second)},
		{run: run, kind: "start", step: "fuzz-short", at: at(390 * time.Second)},
		{run: run, kind: "failed", step: "test-unit", at: at(400 * time.Second)}, // ended already
		{run: run, kind: "end", step: "fuzz-short", at: at(450 * time.Second)},
		{run: run, kind: "end", step: "test-integration", at: at(990 * time.Second)},
	}
	var out bytes.Buffer
	printTable(&out, "f", rows, at(1000*time.Second), true)
	want := `>> test times (f)
   step                      result     wall  prerequisites
   vet                       ok        1m00s             0s
   conformance               failed    1m30s            30s
   test-integration          ok       15m00s             0s
   test-unit                 ok        5m00s             0s
   fuzz-short                ok        1m00s             0s
   (after test-integration)  stopped     10s
   total                              16m40s
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestAppendRow: the file holds one run; a row of another run empties it.
func TestAppendRow(t *testing.T) {
	file := filepath.Join(t.TempDir(), "times.tsv")
	for _, r := range []row{
		{run: "1", kind: "start", step: "vet", at: time.Unix(1, 0)},
		{run: "1", kind: "end", step: "vet", at: time.Unix(2, 0)},
		{run: "2", kind: "start", step: "lint", at: time.Unix(3, 0)},
		{run: "2", kind: "pkg", step: "lint\tx", pkg: "p", result: "ok", seconds: 1.5, at: time.Unix(4, 0)},
	} {
		if err := appendRow(file, r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := readRows(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].step != "lint" || rows[1].step != "lint x" || rows[1].seconds != 1.5 || !rows[1].at.Equal(time.Unix(4, 0)) {
		t.Errorf("rows = %+v, want run 2's two rows", rows)
	}
}
