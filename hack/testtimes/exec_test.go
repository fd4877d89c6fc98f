package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execCommand is testtimes exec of argv, run in a package p of a module
// example.com/m, recording to file.
func execCommand(t *testing.T, file string, argv ...string) *exec.Cmd {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("// a module\nmodule example.com/m\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "p")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], append([]string{"exec", "-file", file}, argv...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TESTTIMES_TEST_MAIN=1", runEnv+"=1700000000000000000")
	return cmd
}

// startReading starts cmd and returns the lines of its output.
func startReading(t *testing.T, cmd *exec.Cmd) *bufio.Scanner {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return bufio.NewScanner(stdout)
}

// TestExec: the binary's exit status is testtimes exec's, and the CPU time
// of the binary and of what it waited for is recorded for the package of
// the directory it ran in.
func TestExec(t *testing.T) {
	file := filepath.Join(t.TempDir(), "times.tsv")
	// The binary is a shell that waits for another, which spins: the CPU
	// is its child's.
	spin := `sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; echo spun; exit 3`
	cmd := execCommand(t, file, "sh", "-c", spin)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exec: %v (%s), want exit status 3", err, out)
	}
	if string(out) != "spun\n" {
		t.Errorf("output %q, want the binary's", out)
	}
	// What the spinning child took, as the kernel counts it here.
	ps := exit.ProcessState
	self := ps.UserTime() + ps.SystemTime()
	rows, err := readRows(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].kind != "cpu" || rows[0].pkg != "example.com/m/p" || rows[0].run != "1700000000000000000" {
		t.Fatalf("rows %+v, want one cpu row of example.com/m/p", rows)
	}
	// testtimes itself takes little; the row is what its children took.
	if got := rows[0].seconds; got < 0.05 || got > self.Seconds()+0.01 {
		t.Errorf("CPU recorded %.3fs; want at least 0.05s (the spinning grandchild) and at most testtimes' whole %.3fs", got, self.Seconds())
	}
}

// TestExecSignals: a binary killed by a signal ends testtimes exec by the
// same signal; go test's timeout (SIGQUIT) is passed on; an interrupt sent
// to testtimes alone is not (the process group's reaches the binary).
func TestExecSignals(t *testing.T) {
	file := filepath.Join(t.TempDir(), "times.tsv")
	err := execCommand(t, file, "sh", "-c", "kill -TERM $$").Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("exec of a binary killed by SIGTERM: %v", err)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("exec of a binary killed by SIGTERM ended with %v, want the signal", ws)
	}

	cmd := execCommand(t, file, "sh", "-c", `trap 'echo interrupted' INT; trap 'echo quit; exit 7' QUIT; echo ready; while :; do sleep 0.05; done`)
	lines := startReading(t, cmd)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the binary did not start: %q", lines.Text())
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(300 * time.Millisecond) // a passed-on interrupt would be trapped by now
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	// Should SIGQUIT not reach the binary, end both (the parent-death signal).
	stop := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
	defer stop.Stop()
	var rest bytes.Buffer
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	err = cmd.Wait()
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Errorf("exec after SIGQUIT: %v, want the binary's exit status 7", err)
	}
	if rest.String() != "quit\n" {
		t.Errorf("the binary printed %q after it was ready; want SIGQUIT's trap alone", rest.String())
	}
}

// TestExecDies: when testtimes exec is killed (go test's SIGKILL past its
// timeout), so is the binary.
func TestExecDies(t *testing.T) {
	cmd := execCommand(t, filepath.Join(t.TempDir(), "times.tsv"), "sh", "-c", "echo $$; exec sleep 60")
	lines := startReading(t, cmd)
	if !lines.Scan() {
		t.Fatal("the binary printed no pid")
	}
	pid, err := strconv.Atoi(lines.Text())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		// Gone, or a zombie that its new parent has yet to reap.
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binary (pid %d) lives on after testtimes exec was killed: %s", pid, stat)
		}
	}
}

func TestPackageOf(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module\t\"example.com/q\" // quoted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{root: "example.com/q", deep: "example.com/q/a/b"} {
		if got, err := packageOf(dir); err != nil || got != want {
			t.Errorf("packageOf(%s) = %q, %v; want %q", dir, got, err, want)
		}
	}
}

// TestPrintTableCPU: a package's CPU time is the last one testtimes exec
// recorded for it before go test said it was done; a package run without
// it (a fuzz target's binary) has none; the steps' CPU is summed.
func TestPrintTableCPU(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	run := "1767322800000000000"
	rows := []row{
		{run: run, kind: "cpu", pkg: "m/webhooks", seconds: 150, at: at(99)},
		{run: run, kind: "pkg", step: "test-unit", pkg: "m/webhooks", result: "ok", seconds: 100, at: at(100)},
		{run: run, kind: "cpu", pkg: "m/test/e2e", seconds: 60, at: at(199)},
		{run: run, kind: "pkg", step: "test-integration", pkg: "m/test/e2e", result: "ok", seconds: 200, at: at(200)},
		{run: run, kind: "pkg", step: "fuzz-short:FuzzX", pkg: "m/webhooks", result: "ok", seconds: 30, at: at(230)},
		{run: run, kind: "cpu", pkg: "m/webhooks", seconds: 12, at: at(239)},
		{run: run, kind: "pkg", step: "fuzz-short:extremes", pkg: "m/webhooks", result: "ok", seconds: 10, at: at(240)},
	}
	var out bytes.Buffer
	printTable(&out, "f", rows, at(300), false)
	want := `>> test times (f)
>> packages, slowest first (go test's time of each: its tests' run, not its build; CPU: of its test binary and the processes it waited for, and that over its time)
     time     CPU  cores  result  step                 package
   200.0s   60.0s   0.30  ok      test-integration     m/test/e2e
   100.0s  150.0s   1.50  ok      test-unit            m/webhooks
    30.0s                 ok      fuzz-short:FuzzX     m/webhooks
    10.0s   12.0s   1.20  ok      fuzz-short:extremes  m/webhooks
   CPU of the tests, by step: test-unit 2m30s, test-integration 1m00s, fuzz-short:extremes 12s; in all 3m42s
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}
