package child

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Process is a started child.
type Process struct {
	// Cmd is the command as started; Cmd.Process is set.
	Cmd *exec.Cmd

	exited chan struct{}
	err    error // set before exited is closed
}

// Start starts cmd with a parent-death signal (SIGKILL) and a process group
// of its own, adding them to any SysProcAttr the caller set. Close the
// writers of cmd.Stdout and cmd.Stderr, if they need closing, after Exited.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = sysProcAttr(cmd.SysProcAttr)
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the
		// child, which is the point.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	return p, nil
}

// Pid is the child's process id (and process group id).
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the child has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the child's exit status (nil for status 0) once Exited is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Running tells whether the child has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitCode is the child's exit status once Exited is closed: its exit code,
// or 128+n when signal n killed it, as a container runtime reports it.
func (p *Process) ExitCode() int {
	<-p.exited
	ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the child's process group (so that whatever it
// started gets it too).
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Running() {
		return nil
	}
	if err := signalGroup(p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling process group %d: %w", p.Pid(), err)
	}
	return nil
}

// Stop sends SIGTERM to the child's process group and SIGKILL once grace
// has passed, and returns once the child has exited. It reports whether
// the child had to be killed.
func (p *Process) Stop(grace time.Duration) (killed bool, err error) {
	if !p.Running() {
		return false, nil
	}
	if grace > 0 {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			return false, err
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
			return false, nil
		case <-t.C:
		}
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return false, err
	}
	<-p.exited
	return true, nil
}
