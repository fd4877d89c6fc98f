package atomicwriter

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	dataLink    = "..data"
	dataTmpLink = "..data_tmp"
	// versionPrefix starts the name of every version directory, as the
	// kubelet names them: "..<UTC timestamp>".
	versionPrefix = ".."
	versionLayout = "..2006_01_02_15_04_05."
)

// File is one file of a payload.
type File struct {
	Data []byte
	// Mode of the file; 0644 when zero.
	Mode fs.FileMode
	// UID and GID, when set, own the file (else the writer does). The
	// kubelet gives a projected service-account token to the pod's user
	// this way.
	UID, GID *int
}

// Payload maps relative paths ("key", "sub/dir/key") to files.
type Payload map[string]File

// Writer keeps one directory in step with successive payloads.
type Writer struct {
	dir string
	// DirGID, when not -1, owns the version directories (a pod's fsGroup).
	DirGID int
}

// New returns a writer for dir, which it creates (mode 0755) if missing.
func New(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating volume directory %s: %w", dir, err)
	}
	return &Writer{dir: dir, DirGID: -1}, nil
}

// Dir is the directory the writer projects into.
func (w *Writer) Dir() string { return w.dir }

// Current is the name of the version directory "..data" points to, "" if
// nothing was written yet.
func (w *Writer) Current() string {
	target, err := os.Readlink(filepath.Join(w.dir, dataLink))
	if err != nil {
		return ""
	}
	return target
}

// Write projects payload. It reports whether anything changed: a payload
// equal to the projected one (same paths, content, modes) writes nothing.
func (w *Writer) Write(payload Payload) (changed bool, err error) {
	if err := validate(payload); err != nil {
		return false, err
	}
	old := w.Current()
	if old != "" && w.equal(old, payload) {
		return false, nil
	}

	version, err := os.MkdirTemp(w.dir, time.Now().UTC().Format(versionLayout))
	if err != nil {
		return false, fmt.Errorf("creating a version directory in %s: %w", w.dir, err)
	}
	if err := w.writeVersion(version, payload); err != nil {
		_ = os.RemoveAll(version)
		return false, err
	}

	tmp := filepath.Join(w.dir, dataTmpLink)
	_ = os.Remove(tmp) // left over by an interrupted write
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		_ = os.RemoveAll(version)
		return false, fmt.Errorf("linking %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, dataLink)); err != nil {
		_ = os.RemoveAll(version)
		return false, fmt.Errorf("swapping %s: %w", dataLink, err)
	}

	if err := w.updateVisible(payload); err != nil {
		return true, err
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(w.dir, old)); err != nil {
			return true, fmt.Errorf("removing the old version %s: %w", old, err)
		}
	}
	return true, nil
}

// writeVersion writes every file of payload under version.
func (w *Writer) writeVersion(version string, payload Payload) error {
	if err := os.Chmod(version, 0o755); err != nil { // MkdirTemp made it 0700
		return fmt.Errorf("setting the mode of %s: %w", version, err)
	}
	if w.DirGID != -1 {
		if err := os.Lchown(version, -1, w.DirGID); err != nil {
			return fmt.Errorf("setting the group of %s: %w", version, err)
		}
	}
	for _, p := range sortedPaths(payload) {
		f := payload[p]
		full := filepath.Join(version, filepath.FromSlash(p))
		if err := w.mkdirs(version, filepath.Dir(full)); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", full, err)
		}
		// Chmod after writing: WriteFile's mode is masked by the umask.
		if err := os.Chmod(full, f.mode()); err != nil {
			return fmt.Errorf("setting the mode of %s: %w", full, err)
		}
		if f.UID != nil || f.GID != nil {
			if err := os.Lchown(full, idOrKeep(f.UID), idOrKeep(f.GID)); err != nil {
				return fmt.Errorf("setting the owner of %s: %w", full, err)
			}
		}
	}
	return nil
}

func (w *Writer) mkdirs(version, dir string) error {
	if dir == version {
		return nil
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := w.mkdirs(version, filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", dir, err)
	}
	if w.DirGID != -1 {
		if err := os.Lchown(dir, -1, w.DirGID); err != nil {
			return fmt.Errorf("setting the group of %s: %w", dir, err)
		}
	}
	return nil
}

// updateVisible makes a "<name> -> ..data/<name>" symlink for the first
// element of every path of payload, and removes the links of names that
// left it.
func (w *Writer) updateVisible(payload Payload) error {
	want := map[string]bool{}
	for p := range payload {
		first, _, _ := strings.Cut(p, "/")
		want[first] = true
	}
	for name := range want {
		link := filepath.Join(w.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(path.Join(dataLink, name), link); err != nil {
			return fmt.Errorf("linking %s: %w", link, err)
		}
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", w.dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), versionPrefix) || want[e.Name()] {
			continue
		}
		if e.Type()&fs.ModeSymlink == 0 {
			continue // not ours: only links are removed
		}
		if err := os.Remove(filepath.Join(w.dir, e.Name())); err != nil {
			return fmt.Errorf("removing %s: %w", e.Name(), err)
		}
	}
	return nil
}

// equal tells whether version holds exactly payload.
func (w *Writer) equal(version string, payload Payload) bool {
	root := filepath.Join(w.dir, version)
	seen := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		f, ok := payload[filepath.ToSlash(rel)]
		if !ok {
			return errDiffers
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != f.mode() || !sameOwner(info, f) {
			return errDiffers
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(data, f.Data) {
			return errDiffers
		}
		seen++
		return nil
	})
	return err == nil && seen == len(payload)
}

var errDiffers = errors.New("differs")

func idOrKeep(id *int) int {
	if id == nil {
		return -1
	}
	return *id
}

func (f File) mode() fs.FileMode {
	if f.Mode == 0 {
		return 0o644
	}
	return f.Mode.Perm()
}

// validate refuses paths that would escape the directory or collide with
// the writer's own entries, as the kubelet does.
func validate(payload Payload) error {
	for p := range payload {
		switch {
		case p == "":
			return errors.New("empty path in payload")
		case path.IsAbs(p):
			return fmt.Errorf("path %q is absolute", p)
		case strings.HasPrefix(p, ".."):
			return fmt.Errorf("path %q starts with '..'", p)
		case slices.Contains(strings.Split(p, "/"), ".."):
			return fmt.Errorf("path %q contains '..'", p)
		case path.Clean(p) != p:
			return fmt.Errorf("path %q is not clean", p)
		}
	}
	// A path may not be both a file and a directory ("a" and "a/b").
	for p := range payload {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := payload[dir]; ok {
				return fmt.Errorf("path %q is a file and the directory of %q", dir, p)
			}
		}
	}
	return nil
}

func sortedPaths(payload Payload) []string {
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}
