package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/internal/child"
)

// component is one of the node's processes, run in its network namespace.
// It can be stopped, restarted, paused and resumed, for the fault specs.
type component struct {
	name    string
	argv    []string // without the netns prefix
	logPath string
	pidPath string
	slot    slot

	mu   sync.Mutex
	proc *child.Process
	log  *os.File
}

func (c *Cluster) newComponent(name string, argv ...string) *component {
	comp := &component{
		name:    name,
		argv:    argv,
		logPath: filepath.Join(c.Dir, "logs", name+".log"),
		pidPath: filepath.Join(c.Dir, "pids", name+".pid"),
		slot:    c.slot,
	}
	c.components[name] = comp
	c.order = append(c.order, name)
	return comp
}

func (comp *component) start() error {
	comp.mu.Lock()
	defer comp.mu.Unlock()
	if comp.proc != nil && comp.proc.Running() {
		return fmt.Errorf("%s is already running", comp.name)
	}
	if comp.log == nil {
		f, err := os.OpenFile(comp.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		comp.log = f
	}
	argv := comp.slot.inNetns(comp.argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = comp.log, comp.log
	p, err := child.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", comp.name, err)
	}
	comp.proc = p
	started, err := processStartTime(p.Pid())
	if err != nil {
		return fmt.Errorf("reading the start time of %s: %w", comp.name, err)
	}
	return os.WriteFile(comp.pidPath, []byte(strconv.Itoa(p.Pid())+" "+started+"\n"), 0o644)
}

// processStartTime is when process pid started, in clock ticks after the
// machine's boot (field 22 of /proc/<pid>/stat): with its pid, it names one
// process, which a pid alone does not once the pid is reused
// (killByPidFiles).
func processStartTime(pid int) (string, error) {
	fields, err := statFields(pid)
	if err != nil {
		return "", err
	}
	if len(fields) < 20 {
		return "", fmt.Errorf("unexpected /proc/%d/stat: %q", pid, fields)
	}
	return fields[19], nil
}

// statFields are the fields of /proc/<pid>/stat after the command name,
// from field 3 (the state) on. The command name is in parentheses and may
// hold spaces and ")".
func statFields(pid int) ([]string, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	return strings.Fields(string(stat[i+1:])), nil
}

// stop ends the process, SIGKILL after grace.
func (comp *component) stop(grace time.Duration) error {
	comp.mu.Lock()
	p := comp.proc
	comp.mu.Unlock()
	if p == nil {
		return nil
	}
	// A stopped (SIGSTOP) process must run again to act on SIGTERM.
	_ = p.Signal(syscall.SIGCONT)
	if _, err := p.Stop(grace); err != nil {
		return fmt.Errorf("stopping %s: %w", comp.name, err)
	}
	_ = os.Remove(comp.pidPath)
	return nil
}

func (comp *component) running() bool {
	comp.mu.Lock()
	defer comp.mu.Unlock()
	return comp.proc != nil && comp.proc.Running()
}

func (comp *component) signal(sig syscall.Signal) error {
	comp.mu.Lock()
	p := comp.proc
	comp.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s was never started", comp.name)
	}
	return p.Signal(sig)
}

func (comp *component) closeLog() {
	comp.mu.Lock()
	defer comp.mu.Unlock()
	if comp.log != nil {
		_ = comp.log.Close()
		comp.log = nil
	}
}

// exitedEarly describes a component that is not running although it should.
func (comp *component) exitedEarly() error {
	comp.mu.Lock()
	p := comp.proc
	comp.mu.Unlock()
	if p == nil || p.Running() {
		return nil
	}
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", comp.name, p.Err(), comp.logPath, controlplane.Tail(comp.logPath, 25))
}
