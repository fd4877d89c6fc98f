package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// execTest runs a test binary as go test -exec does (argv: the binary and
// its arguments, in the package's directory), and appends a row of kind
// cpu to file: the CPU time (user and system) of the binary and of every
// process it waited for, as the kernel counts them when the binary is
// reaped. Those are the processes a suite starts and stops (etcd,
// kube-apiserver, a kubelet, flagd); a process left to live on after its
// parent is counted by nobody. It returns the binary's exit status, or
// the signal that ended it.
//
// go test -exec sends its timeout's SIGQUIT to this process: it is passed
// on, so that the binary prints its goroutines as it would. An interrupt
// or a termination sent to the process group reaches the binary itself,
// and is not passed on a second time (a second interrupt makes Ginkgo
// skip its cleanup). When this process dies, the binary is killed (a
// parent-death signal), as go test kills a test binary past its timeout.
// err is an error of starting the binary: it did not run.
func execTest(file string, argv []string) (status int, sig syscall.Signal, err error) {
	pkg, err := packageOf(".")
	if err != nil {
		return 0, 0, err
	}
	// The parent-death signal is sent when the thread that started the
	// child ends: keep this goroutine on its thread to the end.
	runtime.LockOSThread()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = childAttr()
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGQUIT, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	go func() {
		for s := range signals {
			if s == syscall.SIGQUIT {
				_ = cmd.Process.Signal(s)
			}
		}
	}()
	waitErr := cmd.Wait()
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		return 0, 0, waitErr
	}
	ps := cmd.ProcessState
	cpu := ps.UserTime() + ps.SystemTime()
	if err := appendRow(file, row{run: os.Getenv(runEnv), kind: "cpu", pkg: pkg, seconds: cpu.Seconds(), at: time.Now()}); err != nil {
		// The test's result stands: only its CPU time is not recorded.
		fmt.Fprintln(os.Stderr, "testtimes:", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 0, ws.Signal(), nil
	}
	return ps.ExitCode(), 0, nil
}

// packageOf is the import path of the package in dir: the module path of
// the nearest go.mod above it, and dir's path below that.
func packageOf(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for root := abs; ; root = filepath.Dir(root) {
		if module, err := modulePath(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, abs)
			if err != nil {
				return "", err
			}
			if rel == "." {
				return module, nil
			}
			return module + "/" + filepath.ToSlash(rel), nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if filepath.Dir(root) == root {
			return "", fmt.Errorf("no go.mod in %s or above it", abs)
		}
	}
}

// modulePath is the module path a go.mod declares.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line, _, _ := strings.Cut(s.Text(), "//")
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s declares no module", gomod)
}
