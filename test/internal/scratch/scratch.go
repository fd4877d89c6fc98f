// Package scratch makes the temporary directories of the test harness (a
// control plane's, a node's) so that a run that dies before its clean-up
// (a panic, a kill, a timeout) does not leave them behind for good.
//
// Each directory holds a lock file that its process keeps locked for as
// long as it lives. The lock is flock(2)'s, which the kernel releases
// however the process ends. Making a directory first removes those of the
// same prefix whose lock is free: their process is gone. A directory
// without a lock file (one kept on purpose, or made by something else) is
// never removed.
package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lockName is the lock file's name in each directory.
const lockName = ".owner.lock"

// Dir is a directory made by Make, locked by this process.
type Dir struct {
	// Path is the directory's path.
	Path string
	lock *os.File
}

// Make removes the directories that dead runs left with prefix (Reap), and
// makes a new one in the temporary directory, locked by this process.
func Make(prefix string) (*Dir, error) {
	_, _ = Reap(prefix)
	path, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	// Locked under another name first, then renamed: a Reap that finds
	// the lock file finds it locked.
	f, err := os.CreateTemp(path, ".lock-")
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(path))
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, errors.Join(fmt.Errorf("locking %s: %w", f.Name(), err), os.RemoveAll(path))
	}
	if err := os.Rename(f.Name(), filepath.Join(path, lockName)); err != nil {
		_ = f.Close()
		return nil, errors.Join(err, os.RemoveAll(path))
	}
	return &Dir{Path: path, lock: f}, nil
}

// Remove removes the directory.
func (d *Dir) Remove() error {
	_ = d.lock.Close()
	return os.RemoveAll(d.Path)
}

// Keep keeps the directory for good: its lock file goes, so that no later
// Reap removes it.
func (d *Dir) Keep() error {
	err := os.Remove(filepath.Join(d.Path, lockName))
	_ = d.lock.Close()
	return err
}

// Reap removes the directories of the temporary directory whose names
// start with prefix and whose lock file is not locked: the process that
// made them is gone. It returns those it removed.
func Reap(prefix string) ([]string, error) { return ReapIn(os.TempDir(), prefix) }

// ReapIn is Reap in parent: for a child process given a temporary
// directory of its own ($TMPDIR), whose directories the Reaps of other
// processes never see.
func ReapIn(parent, prefix string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(parent, prefix+"*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, dir := range matches {
		if !strings.HasPrefix(filepath.Base(dir), prefix) {
			continue
		}
		dead, err := abandoned(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if dead {
			removed = append(removed, dir)
		}
	}
	return removed, errors.Join(errs...)
}

// abandoned removes dir when its lock file exists and is free, holding the
// lock meanwhile so that two Reaps do not race; it says whether it did.
func abandoned(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // not made by Make, or kept
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // its process lives
		}
		return false, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("removing %s, left by a run that died: %w", dir, err)
	}
	return true, nil
}
