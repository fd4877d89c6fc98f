package mountns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

func newNamespaceAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
}

func supported() error { return nil }

// init turns this process into the helper when it was started by Command.
// It runs before main (and before any test), and never returns then.
func init() {
	data, ok := os.LookupEnv(specEnv)
	if !ok {
		return
	}
	// One thread from here on: the parent-death signal is armed on it and
	// the exec happens from it.
	runtime.LockOSThread()
	report := os.NewFile(3, "start-report")
	var spec Spec
	if err := json.Unmarshal([]byte(data), &spec); err != nil {
		fail(report, fmt.Errorf("decoding the helper spec: %w", err))
	}
	_ = os.Unsetenv(specEnv)
	if err := run(spec, report); err != nil {
		fail(report, err)
	}
	os.Exit(0) // ModeCheck and ModeIdle end here
}

func fail(report *os.File, err error) {
	msg := "flagplane node: " + err.Error()
	_, _ = fmt.Fprintln(report, msg)
	_, _ = fmt.Fprintln(os.Stderr, msg)
	os.Exit(128)
}

func run(spec Spec, report *os.File) error {
	// Nothing done in this namespace may propagate back to the host's.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts of the new namespace private: %w", err)
	}
	switch spec.Mode {
	case ModeCheck:
		if err := syscall.Mount("tmpfs", spec.Scratch, "tmpfs", 0, "mode=0700"); err != nil {
			return fmt.Errorf("mounting a tmpfs in a new mount namespace: %w", err)
		}
		_ = report.Close()
		return nil
	case ModeIdle:
		return idle(spec, report)
	case ModeExec:
		return execIn(spec, report)
	default:
		return fmt.Errorf("unknown helper mode %q", spec.Mode)
	}
}

// idle is the placeholder of a container that cannot run here: it says so
// on stdout (the container's log) and waits to be stopped.
func idle(spec Spec, report *os.File) error {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	if err := armParentDeathSignal(spec.ParentPID); err != nil {
		return err
	}
	_ = report.Close()
	fmt.Println(spec.Message)
	sig := <-signals
	fmt.Printf("placeholder stopped by %v\n", sig)
	return nil
}

func execIn(spec Spec, report *os.File) error {
	m := &mounter{scratch: spec.Scratch, ours: map[string]bool{}}
	if err := syscall.Mount("tmpfs", spec.Scratch, "tmpfs", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mounting the helper's scratch tmpfs on %s: %w", spec.Scratch, err)
	}
	mounts := slices.Clone(spec.Mounts)
	slices.SortStableFunc(mounts, func(a, b Mount) int { return strings.Compare(a.Target, b.Target) })
	for _, mnt := range mounts {
		if err := m.bind(mnt); err != nil {
			return err
		}
	}
	if spec.ReadOnlyRoot {
		if err := syscall.Mount("", "/", "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remounting / read-only: %w", err)
		}
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	if err := setIdentity(spec); err != nil {
		return err
	}
	if err := os.Chdir(dir); err != nil {
		return fmt.Errorf("changing to the working directory: %w", err)
	}
	if err := armParentDeathSignal(spec.ParentPID); err != nil {
		return err
	}
	// The report pipe closes on a successful exec, which tells the agent
	// that the program runs.
	syscall.CloseOnExec(int(report.Fd()))
	path, err := lookPath(spec.Path, spec.Env)
	if err != nil {
		return err
	}
	argv := append([]string{spec.Path}, spec.Args...)
	err = syscall.Exec(path, argv, spec.Env)
	return fmt.Errorf("exec %s: %w", spec.Path, err)
}

// defaultPath is a container runtime's PATH when the image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookPath finds a command without a slash in the PATH of env, as a
// container runtime does for an exec command, in the namespace's view.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: executable file not found in $PATH", name)
}

// setIdentity drops to the container's user. Groups first: afterwards the
// process may no longer change them.
func setIdentity(spec Spec) error {
	if spec.GID != nil || len(spec.Groups) > 0 || spec.UID != nil {
		if err := syscall.Setgroups(spec.Groups); err != nil {
			return fmt.Errorf("setting supplementary groups %v: %w", spec.Groups, err)
		}
	}
	if spec.GID != nil {
		if err := syscall.Setgid(*spec.GID); err != nil {
			return fmt.Errorf("setting gid %d: %w", *spec.GID, err)
		}
	}
	if spec.UID != nil {
		if err := syscall.Setuid(*spec.UID); err != nil {
			return fmt.Errorf("setting uid %d: %w", *spec.UID, err)
		}
	}
	return nil
}

// armParentDeathSignal sets the parent-death signal again: a change of
// credentials clears it. If the agent died before, nobody would kill us.
func armParentDeathSignal(parent int) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return fmt.Errorf("setting the parent-death signal: %w", errno)
	}
	if os.Getppid() != parent {
		return errors.New("the agent exited while the container was starting")
	}
	return nil
}

// mounter makes bind mounts, creating missing mount points on tmpfs
// shadows, never on the host.
type mounter struct {
	scratch string
	shadows int
	// ours are the directories the helper created or shadowed: what lies
	// directly in them is on a tmpfs of this namespace.
	ours map[string]bool
}

func (m *mounter) bind(mnt Mount) error {
	src, err := os.Stat(mnt.Source)
	if err != nil {
		return fmt.Errorf("volume source for %s: %w", mnt.Target, err)
	}
	target, err := m.mountPoint(filepath.Clean(mnt.Target), src.IsDir())
	if err != nil {
		return fmt.Errorf("creating the mount point %s: %w", mnt.Target, err)
	}
	if err := syscall.Mount(mnt.Source, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting at %s: %w", mnt.Target, err)
	}
	if mnt.ReadOnly {
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", mnt.Target, err)
		}
	}
	return nil
}

// mountPoint returns the resolved path of target, creating it (a directory,
// or an empty file when the source is one) if it is missing.
func (m *mounter) mountPoint(target string, dir bool) (string, error) {
	if info, err := os.Stat(target); err == nil {
		if info.IsDir() != dir {
			return "", fmt.Errorf("exists, and is %s", kind(info.IsDir()))
		}
		return filepath.EvalSymlinks(target)
	}
	// The deepest ancestor that exists, and what is missing below it.
	ancestor, missing := target, []string(nil)
	for {
		if _, err := os.Stat(ancestor); err == nil {
			break
		}
		missing = append([]string{filepath.Base(ancestor)}, missing...)
		ancestor = filepath.Dir(ancestor)
	}
	real, err := filepath.EvalSymlinks(ancestor)
	if err != nil {
		return "", err
	}
	if !m.ours[real] {
		if real == "/" {
			return "", fmt.Errorf("/%s does not exist, and a directory under / cannot be created in the namespace", missing[0])
		}
		if err := m.shadow(real); err != nil {
			return "", err
		}
	}
	path := real
	for i, name := range missing {
		path = filepath.Join(path, name)
		if i == len(missing)-1 && !dir {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			_ = f.Close()
			break
		}
		if err := os.Mkdir(path, 0o755); err != nil {
			return "", err
		}
		m.ours[path] = true
	}
	return path, nil
}

// shadow mounts a tmpfs over dir and binds dir's original entries back onto
// it, so that new entries can be created in dir without touching the host.
func (m *mounter) shadow(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, _ := info.Sys().(*syscall.Stat_t)
	m.shadows++
	staging := filepath.Join(m.scratch, "shadow-"+strconv.Itoa(m.shadows))
	if err := os.Mkdir(staging, 0o700); err != nil {
		return err
	}
	if err := syscall.Mount(dir, staging, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("keeping the original %s: %w", dir, err)
	}
	opts := fmt.Sprintf("mode=%o", info.Mode().Perm()|info.Mode()&fs.ModeSticky)
	if st != nil {
		opts += fmt.Sprintf(",uid=%d,gid=%d", st.Uid, st.Gid)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("mounting a tmpfs over %s: %w", dir, err)
	}
	entries, err := os.ReadDir(staging)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src, dst := filepath.Join(staging, e.Name()), filepath.Join(dir, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, dst); err != nil {
				return err
			}
			continue
		case e.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
		default:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_ = f.Close()
		}
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s back: %w", dst, err)
		}
	}
	m.ours[dir] = true
	return nil
}

func kind(dir bool) string {
	if dir {
		return "a directory"
	}
	return "not a directory"
}
