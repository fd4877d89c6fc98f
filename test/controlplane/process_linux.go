package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// watchdog is a shell that blocks reading a pipe whose only writer is the
// test process. When the test process ends, however it ends, the kernel
// closes the pipe, the read returns and the shell kills the process groups
// it was given. A parent-death signal would do for processes we start, but
// envtest starts etcd and kube-apiserver itself and sets no such signal.
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // write end, held open by this process only (close-on-exec)
}

func startWatchdog(pids []int) (*watchdog, error) {
	groups := make([]string, len(pids))
	for i, pid := range pids {
		groups[i] = "-" + strconv.Itoa(pid)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the watchdog's pipe: %w", err)
	}
	defer r.Close()
	// `kill -9 -PGID` and not `kill -s KILL -- -PGID`: dash, the usual
	// /bin/sh, takes no "--" and no -s with a negative pid.
	script := "trap '' INT HUP TERM; read -r _; kill -9 " + strings.Join(groups, " ") + " 2>/dev/null; exit 0"
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdin = r
	// Its own process group, so that a Ctrl-C meant for the test does not
	// take the watchdog down first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, pipe: w}, nil
}

// disarm ends the watchdog without letting it kill anything: the processes
// it guards have been stopped, and their pids may be reused.
func (w *watchdog) disarm() {
	if w == nil {
		return
	}
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
	_ = w.pipe.Close()
}

// childrenMentioning returns the pids of this process's children whose
// command line contains s. envtest does not expose the pids of the
// processes it starts; their command lines name their directories.
func childrenMentioning(s string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// Fields after the command name, which is in parentheses and may
		// contain spaces: state, ppid, ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
