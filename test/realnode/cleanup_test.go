package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The cleanup of a dead run runs at the next run's start, when the pids
// its files name may be any process's: it kills only the processes it
// started. The victims here are sleeps of this test's own.
func TestPidFilesKillOnlyTheirProcesses(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	sleep := func(name, content func(pid int, started string) string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		started, err := processStartTime(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "pids", name(cmd.Process.Pid, started)+".pid")
		if err := os.WriteFile(file, []byte(content(cmd.Process.Pid, started)), 0o644); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	named := func(n string) func(int, string) string { return func(int, string) string { return n } }
	own := sleep(named("kubelet"), func(pid int, started string) string { return strconv.Itoa(pid) + " " + started + "\n" })
	// Its pid is the one a dead run's file names; it started later.
	reused := sleep(named("containerd"), func(pid int, started string) string {
		n, _ := strconv.Atoi(started)
		return strconv.Itoa(pid) + " " + strconv.Itoa(n-1) + "\n"
	})
	// A pid file of the harness before start times were recorded.
	bare := sleep(named("kube-proxy"), func(pid int, _ string) string { return strconv.Itoa(pid) })

	script := "DIR=" + shellQuote(dir) + "\n" + killByPidFiles
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Logf("the script: %v: %s", err, out) // its status is not the point: what it killed is
	}

	exited := make(chan error, 1)
	go func() { exited <- own.Wait() }()
	select {
	case err := <-exited:
		if ws, ok := own.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the process of its pid file ended with %v, not by SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the process its pid file names, with its start time, was not killed")
	}
	for name, cmd := range map[string]*exec.Cmd{"a pid reused since": reused, "a pid without a start time": bare} {
		// Not reaped: a killed one is a zombie, which signal 0 still finds.
		if state := processState(cmd.Process.Pid); state != "S" && state != "R" {
			t.Errorf("%s: the process holding it was killed (state %q)", name, state)
		}
	}
}

// processState is the state of process pid (field 3 of /proc/<pid>/stat:
// "S" sleeping, "Z" a zombie, ...), or "" when it is gone.
func processState(pid int) string {
	fields, err := statFields(pid)
	if err != nil || len(fields) == 0 {
		return ""
	}
	return fields[0]
}
