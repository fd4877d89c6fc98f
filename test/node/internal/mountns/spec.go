package mountns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// specEnv carries the JSON Spec to the re-executed helper.
const specEnv = "FLAGPLANE_NODE_MOUNTNS_SPEC"

// Mode says what the helper does.
type Mode string

const (
	// ModeExec sets up the mounts and execs Path.
	ModeExec Mode = "exec"
	// ModeIdle prints Message and waits for SIGTERM or SIGINT, then exits 0:
	// a placeholder for a container whose image has no binary here.
	ModeIdle Mode = "idle"
	// ModeCheck mounts a tmpfs on Scratch in the new namespace and exits:
	// it proves that mount namespaces work here.
	ModeCheck Mode = "check"
)

// Mount is one bind mount.
type Mount struct {
	// Source is a file or directory on the host.
	Source string `json:"source"`
	// Target is where the program sees it.
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Spec is what the helper does.
type Spec struct {
	Mode Mode `json:"mode"`
	// Path is the binary to exec, Args its arguments (argv[1:]) and Env its
	// whole environment.
	Path string   `json:"path,omitempty"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Dir is the working directory; "/" when empty.
	Dir string `json:"dir,omitempty"`
	// Mounts are made in order of their targets.
	Mounts []Mount `json:"mounts,omitempty"`
	// ReadOnlyRoot remounts / read-only (readOnlyRootFilesystem).
	ReadOnlyRoot bool `json:"readOnlyRoot,omitempty"`
	// UID, GID and Groups, when set, are the identity the program runs
	// with (runAsUser, runAsGroup, supplementalGroups and fsGroup).
	UID    *int  `json:"uid,omitempty"`
	GID    *int  `json:"gid,omitempty"`
	Groups []int `json:"groups,omitempty"`
	// Scratch is an existing host directory on which the helper mounts a
	// private tmpfs for its own use (shadowing missing mount points).
	Scratch string `json:"scratch"`
	// Message is what ModeIdle prints.
	Message string `json:"message,omitempty"`
	// ParentPID is the agent's pid: the helper exits if it was orphaned
	// before it could arm its parent-death signal again.
	ParentPID int `json:"parentPID"`
}

// Command returns the command that runs spec in a new mount namespace. The
// caller sets Stdout and Stderr, starts it (test/internal/child adds the
// parent-death signal and process group) and then calls WaitStarted.
func Command(name string, spec Spec) (*exec.Cmd, *StartReport, error) {
	spec.ParentPID = os.Getpid()
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the helper spec: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating the start pipe: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	// argv[0] names the container in ps until the real binary replaces it.
	cmd.Args = []string{name}
	cmd.Env = []string{specEnv + "=" + string(data)}
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the helper
	cmd.SysProcAttr = newNamespaceAttr()
	return cmd, &StartReport{r: r, w: w}, nil
}

// StartReport reads the helper's start pipe.
type StartReport struct {
	r, w *os.File
}

// Wait returns nil once the helper has exec'd the program (or, in
// ModeIdle and ModeCheck, is past its setup), and the helper's error when it
// could not. Call it after the command started (or failed to start).
func (s *StartReport) Wait() error {
	_ = s.w.Close() // ours; the helper holds its own copy
	defer s.r.Close()
	msg, err := io.ReadAll(s.r)
	if err != nil {
		return fmt.Errorf("reading the helper's start report: %w", err)
	}
	if len(msg) > 0 {
		return errors.New(strings.TrimSpace(string(msg)))
	}
	return nil
}

// Close releases the pipe when the command could not be started at all.
func (s *StartReport) Close() {
	_ = s.w.Close()
	_ = s.r.Close()
}

// Check tells whether this process can run programs in mount namespaces
// (CLONE_NEWNS with CAP_SYS_ADMIN, and mounting in it), by doing it once.
func Check(scratch string) error {
	if err := supported(); err != nil {
		return err
	}
	cmd, report, err := Command("flagplane-node-check", Spec{Mode: ModeCheck, Scratch: scratch})
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		report.Close()
		return fmt.Errorf("starting a process in a new mount namespace: %w", err)
	}
	startErr := report.Wait()
	waitErr := cmd.Wait()
	if startErr != nil {
		return startErr
	}
	if waitErr != nil {
		return fmt.Errorf("mount namespace check: %w: %s", waitErr, strings.TrimSpace(stderr.String()))
	}
	return nil
}
