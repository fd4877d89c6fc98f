package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/test/internal/child"
	"github.com/flagplane/flagplane/test/node/internal/mountns"
)

// role is where a container sits in a pod's lifecycle.
type role int

const (
	roleInit    role = iota // an init container that runs to completion
	roleSidecar             // an init container with restartPolicy Always
	roleRegular             // spec.containers
)

// container is one container of a running pod. Its fields after spec are
// guarded by the runner's mutex.
type container struct {
	r      *podRunner
	spec   corev1.Container
	role   role
	kind   runtimeKind
	binary string

	state       corev1.ContainerState
	last        corev1.ContainerState
	restarts    int32
	started     bool
	ready       bool
	containerID string
	imageID     string
	logPath     string
	proc        *child.Process
	// finished: it will not run again (an init container that completed, or
	// a container its restart policy does not restart).
	finished bool
}

func newContainer(r *podRunner, spec corev1.Container, role role) *container {
	c := &container{r: r, spec: spec, role: role}
	c.kind, c.binary = r.n.opts.resolveImage(spec.Image)
	c.state.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
	if role != roleRegular {
		c.state.Waiting.Reason = "ContainerCreating"
	}
	return c
}

// restartable tells whether the container runs again after exiting with
// exitCode.
func (c *container) restartable(exitCode int) bool {
	switch {
	case c.role == roleSidecar:
		return true
	case c.role == roleInit:
		return exitCode != 0 && c.r.restartPolicy() != corev1.RestartPolicyNever
	case c.r.restartPolicy() == corev1.RestartPolicyAlways:
		return true
	case c.r.restartPolicy() == corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return false
}

// run supervises the container until it is finished or the pod stops:
// it starts it, restarts it by its restart policy with the kubelet's
// exponential back-off, and retries a configuration it cannot satisfy
// yet (CreateContainerConfigError).
func (c *container) run(ctx context.Context) {
	opts := &c.r.n.opts
	backoff := time.Duration(0) // the first restart is immediate
	for ctx.Err() == nil {
		began := time.Now()
		exitCode, err := c.runOnce(ctx)
		var cfgErr *configError
		switch {
		case ctx.Err() != nil, c.r.isStopping():
			return
		case errors.As(err, &cfgErr):
			c.setWaiting("CreateContainerConfigError", err.Error())
			c.r.n.event(c.r.podRef(), corev1.EventTypeWarning, "Failed", "Error: %v", err)
			if !c.r.waitChangeOrTimeout(ctx, opts.RestartBackoff) {
				return
			}
			continue
		case err != nil:
			c.setWaiting("CreateContainerError", err.Error())
			c.r.n.event(c.r.podRef(), corev1.EventTypeWarning, "Failed", "Error: %v", err)
			if !sleepCtx(ctx, opts.RestartBackoff) {
				return
			}
			continue
		}
		if !c.restartable(exitCode) {
			c.r.mu.Lock()
			c.finished = true
			c.r.mu.Unlock()
			c.r.changed()
			return
		}
		if time.Since(began) > 2*opts.MaxRestartBackoff {
			backoff = 0 // it ran well for a while: start over, as the kubelet does
		}
		if backoff > 0 {
			c.setWaiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.spec.Name, c.r.key))
			c.r.n.event(c.r.podRef(), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.spec.Name, c.r.key)
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, opts.MaxRestartBackoff)
		} else {
			backoff = opts.RestartBackoff
		}
		c.r.mu.Lock()
		c.restarts++
		c.r.mu.Unlock()
	}
}

func (c *container) setWaiting(reason, msg string) {
	c.r.mu.Lock()
	if c.state.Terminated != nil {
		c.last = c.state
	}
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.r.mu.Unlock()
	c.r.changed()
}

// runOnce starts the container and waits until its process exits,
// returning its exit status. A start failure inside the helper (a mount, the
// exec) is reported as the kubelet reports it: terminated with reason
// StartError and exit code 128.
func (c *container) runOnce(ctx context.Context) (int, error) {
	mode, err := runMode(c.kind, c.binary, &c.spec)
	if err != nil {
		return 0, err
	}
	spec, err := c.processSpec(ctx, mode, c.binary, c.spec.Args)
	if err != nil {
		return 0, err
	}
	if mode == mountns.ModeIdle {
		spec.Message = fmt.Sprintf("flagplane test node: no binary for image %q here; container %s runs as an idle placeholder (nothing of the image runs)", c.spec.Image, c.spec.Name)
		if len(c.spec.Command) > 0 {
			spec.Message += fmt.Sprintf("; its command %q is not run", c.spec.Command)
		}
	}
	imageID, err := c.r.n.imageID(c.kind, c.binary)
	if err != nil {
		return 0, err
	}

	c.r.mu.Lock()
	restart := c.restarts
	c.r.mu.Unlock()
	logPath := filepath.Join(c.r.logDir, c.spec.Name, strconv.Itoa(int(restart))+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()

	cmd, report, err := mountns.Command(fmt.Sprintf("flagplane-node:%s/%s", c.r.key, c.spec.Name), spec)
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	c.r.ports.unhold(c.spec.Name)
	proc, err := child.Start(cmd)
	if err != nil {
		report.Close()
		return 0, err
	}
	startErr := report.Wait()
	now := now()
	id := containerID(c.r.uid, c.spec.Name, restart)

	c.r.mu.Lock()
	if c.state.Terminated != nil {
		c.last = c.state
	}
	c.proc, c.containerID, c.imageID, c.logPath = proc, id, imageID, logPath
	if startErr == nil {
		c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		c.started = c.spec.StartupProbe == nil
		c.ready = c.started && c.spec.ReadinessProbe == nil
	}
	// The pod began stopping while this process started: stop sees either
	// the process, or this flag.
	stopping := c.r.stopping
	c.r.mu.Unlock()
	c.r.changed()
	if stopping {
		_, _ = proc.Stop(0)
	}

	if startErr != nil {
		_ = proc.Err()
		c.terminated(now, 128, "StartError", startErr.Error())
		c.r.n.event(c.r.podRef(), corev1.EventTypeWarning, "Failed", "Error: %v", startErr)
		return 128, nil
	}
	c.r.n.event(c.r.podRef(), corev1.EventTypeNormal, "Started", "Started container %s (%s, pid %d)", c.spec.Name, c.kind, proc.Pid())

	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	c.startProbes(probeCtx)

	<-proc.Exited()
	stopProbes()
	code := proc.ExitCode()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	c.terminated(now, code, reason, "")
	return code, nil
}

// runMode says how a container of an image of kind runs. A binary stands
// for its image's entrypoint, so a container that replaces the entrypoint
// (command) cannot run as one: CreateContainerError. A placeholder runs
// nothing of its image, so the command it would run does not matter: a
// container of an image this node does not have, with or without a
// command (busybox with `command: [sh, -c, ...]`), is an idle placeholder.
func runMode(kind runtimeKind, binary string, spec *corev1.Container) (mountns.Mode, error) {
	switch {
	case kind == runPlaceholder:
		return mountns.ModeIdle, nil
	case len(spec.Command) > 0:
		return "", fmt.Errorf("container sets command %q: the flagplane test node runs image %s as %s (its entrypoint) and can only pass it args",
			spec.Command, spec.Image, filepath.Base(binary))
	}
	return mountns.ModeExec, nil
}

func (c *container) terminated(started metav1.Time, code int, reason, msg string) {
	c.r.mu.Lock()
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: msg,
		StartedAt: started, FinishedAt: now(), ContainerID: c.containerID,
	}}
	c.started, c.ready = false, false
	c.r.mu.Unlock()
	c.r.changed()
}

// startProbes starts the container's probes for one run of its process:
// the startup probe first, the others once it has passed.
func (c *container) startProbes(ctx context.Context) {
	afterStart := func() {
		if p := c.spec.LivenessProbe; p != nil {
			go c.runProbe(ctx, probeLiveness, p, func(ok bool, detail string) {
				if !ok {
					c.killForRestart(fmt.Sprintf("Container %s failed liveness probe, will be restarted", c.spec.Name), p)
				}
			})
		}
		if p := c.spec.ReadinessProbe; p != nil {
			go c.runProbe(ctx, probeReadiness, p, func(ok bool, _ string) {
				c.r.mu.Lock()
				c.ready = ok
				c.r.mu.Unlock()
				c.r.changed()
			})
		}
	}
	p := c.spec.StartupProbe
	if p == nil {
		afterStart()
		return
	}
	go c.runProbe(ctx, probeStartup, p, func(ok bool, detail string) {
		if !ok {
			c.killForRestart(fmt.Sprintf("Container %s failed startup probe, will be restarted", c.spec.Name), p)
			return
		}
		c.r.mu.Lock()
		c.started = true
		c.ready = c.spec.ReadinessProbe == nil
		c.r.mu.Unlock()
		c.r.changed()
		afterStart()
	})
}

// killForRestart stops the process after a failed startup or liveness
// probe; run then restarts it by its restart policy.
func (c *container) killForRestart(msg string, p *corev1.Probe) {
	c.r.n.event(c.r.podRef(), corev1.EventTypeNormal, "Killing", "%s", msg)
	grace := c.r.terminationGrace()
	if p.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
	}
	c.r.mu.Lock()
	proc := c.proc
	c.r.mu.Unlock()
	if proc != nil {
		go func() { _, _ = proc.Stop(grace) }()
	}
}

// stop ends the container's process (SIGTERM, SIGKILL after grace).
func (c *container) stop(grace time.Duration) {
	c.r.mu.Lock()
	proc := c.proc
	c.r.mu.Unlock()
	if proc == nil || !proc.Running() {
		return
	}
	c.r.n.event(c.r.podRef(), corev1.EventTypeNormal, "Killing", "Stopping container %s", c.spec.Name)
	_, _ = proc.Stop(grace)
}

// processSpec is what the mount-namespace helper needs to run path with
// args as this container: its environment, mounts and identity.
func (c *container) processSpec(ctx context.Context, mode mountns.Mode, path string, args []string) (mountns.Spec, error) {
	r := c.r
	pod := r.currentPod()
	envs, err := resolveEnv(ctx, r.n.envSource, pod, &c.spec, &r.n.facts, r.n.serviceEnv)
	if err != nil {
		return mountns.Spec{}, err
	}
	// Ports first, so that "$(FLAGD_SYNC_PORT)" in args expands to the port
	// that reaches the sidecar.
	rewriteEnvPorts(envs.vars, r.ports.declaredPort)
	envMap := envs.asMap()
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = expand(a, func(k string) (string, bool) { v, ok := envMap[k]; return v, ok })
	}
	if c.kind == runFlagd && mode == mountns.ModeExec && path == c.binary {
		expanded, err = rewriteFlagdArgs(expanded, envMap, func(p int32) (int, error) { return r.ports.flagdPort(c.spec.Name, p) })
		if err != nil {
			return mountns.Spec{}, fmt.Errorf("remapping flagd's ports: %w", err)
		}
	}
	// What a container runtime adds where the container (or, there, its
	// image) sets none. The binaries here have no image: HOME is the
	// runtime's fallback, PATH its default.
	vars := envs.vars
	for _, v := range []envVar{{"PATH", defaultPath}, {"HOSTNAME", pod.Name}, {"HOME", "/"}} {
		if _, ok := envMap[v.name]; !ok {
			vars = append(vars, v)
		}
	}
	mounts, err := r.volumes.mountsFor(&c.spec, envMap)
	if err != nil {
		return mountns.Spec{}, err
	}
	id, err := containerIdentity(pod, &c.spec)
	if err != nil {
		return mountns.Spec{}, err
	}
	scratch := filepath.Join(r.dir, "scratch", c.spec.Name)
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return mountns.Spec{}, err
	}
	return mountns.Spec{
		Mode: mode, Path: path, Args: expanded, Env: environ(vars), Dir: c.spec.WorkingDir,
		Mounts: mounts, ReadOnlyRoot: readOnlyRoot(&c.spec),
		UID: id.uid, GID: id.gid, Groups: id.groups, Scratch: scratch,
	}, nil
}

// defaultPath is a container runtime's PATH for an image that sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runToCompletion runs spec (an exec probe) and returns its exit status.
func runToCompletion(ctx context.Context, scratch, name string, spec mountns.Spec, out io.Writer) (int, error) {
	dir, err := os.MkdirTemp(scratch, "exec-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	spec.Scratch = dir
	cmd, report, err := mountns.Command(name, spec)
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := child.Start(cmd)
	if err != nil {
		report.Close()
		return 0, err
	}
	if err := report.Wait(); err != nil {
		_ = proc.Err()
		return 0, err
	}
	select {
	case <-proc.Exited():
	case <-ctx.Done():
		_, _ = proc.Stop(0)
		return 0, fmt.Errorf("command timed out: %w", ctx.Err())
	}
	return proc.ExitCode(), nil
}

// containerID is a stable, unique id of one run of a container.
func containerID(uid any, name string, restart int32) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%v/%s/%d", uid, name, restart))
	return "flagplane-node://" + hex.EncodeToString(sum[:])
}
