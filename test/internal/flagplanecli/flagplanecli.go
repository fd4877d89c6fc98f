// Package flagplanecli builds the flagplane command (cmd/flagplane) for a
// suite that runs it as a user would, and runs it against a control plane
// of test/controlplane as its administrator.
package flagplanecli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles cmd/flagplane of the repository at root into dir and
// returns the binary's path.
func Build(root, dir string) (string, error) {
	bin := filepath.Join(dir, "flagplane")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flagplane")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building flagplane: %w: %s", err, out)
	}
	return bin, nil
}

// Result is what one run printed and how it ended.
type Result struct {
	// Stdout and Stderr are what it printed.
	Stdout, Stderr string
	// ExitCode is its exit status (0: success).
	ExitCode int
}

// Run runs the binary with args and --kubeconfig kubeconfig, with no
// KUBECONFIG of the caller's environment. Only a failure to start it is an
// error; a command that fails has a non-zero ExitCode.
func Run(bin, kubeconfig string, args ...string) (Result, error) {
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.ExitCode = exit.ExitCode()
		return r, nil
	}
	return r, err
}
