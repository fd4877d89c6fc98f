// Command toolcache keeps the tools that make builds from Go modules
// (kube-apiserver, helm, Prometheus, golangci-lint, ...) in a directory
// outside the clone, so that a fresh clone, a worktree or bin/ after make
// clean gets them by a copy instead of compiling them again.
//
//	toolcache restore -cache DIR -bin bin -name kube -inputs "hack/tools/kube/go.mod hack/tools/kube/go.sum" kube-apiserver kube-controller-manager
//	toolcache save -cache DIR -bin bin -name kube -inputs "..." kube-apiserver kube-controller-manager
//
// An entry is the named files of bin/ (the outputs, relative to -bin) as one
// recipe built them. It is found by a key, the SHA-256 of:
//   - the recipe: the build commands as make expanded them, from
//     FLAGPLANE_TOOL_RECIPE, with the clone's own path taken out by make, so
//     that two clones of one commit share their entries;
//   - the path and content of each input file (a wrapper module's go.mod
//     and go.sum, its main.go);
//   - what the go command says of the toolchain that builds in the
//     directory of the first input: GOVERSION, GOOS, GOARCH, GOAMD64,
//     CGO_ENABLED and GOFLAGS.
//
// A change to any of them misses, and make builds. restore exits 0 when it
// copied every output into bin/, and 1 when it did not (a miss, an empty
// -cache, or an error, which it prints): make then builds and saves. save
// copies the outputs into a new entry, complete or not at all, and keeps
// the -keep newest entries of the name (restoring an entry makes it the
// newest), so that a version bump does not leave the old one behind. Each
// entry holds recipe.txt, what its key was made of.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// recipeEnv holds the build commands of the tool, as make expanded them.
const recipeEnv = "FLAGPLANE_TOOL_RECIPE"

// goEnvVars are what the key takes of the toolchain: what changes the
// binaries it builds from the same recipe and inputs.
var goEnvVars = []string{"GOVERSION", "GOOS", "GOARCH", "GOAMD64", "CGO_ENABLED", "GOFLAGS"}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "restore" && os.Args[1] != "save") {
		fmt.Fprintln(os.Stderr, "usage: toolcache restore|save -cache DIR -bin DIR -name NAME [-inputs FILES] [-keep N] OUTPUT...")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var e entry
	fs.StringVar(&e.cache, "cache", "", "the cache's directory; empty: restore misses and save does nothing")
	fs.StringVar(&e.bin, "bin", "bin", "the directory the outputs are in")
	fs.StringVar(&e.name, "name", "", "the tool's name, the first part of its entries' names")
	inputs := fs.String("inputs", "", "the files, space-separated, whose content the outputs depend on")
	keep := fs.Int("keep", 2, "save: how many entries of the name to keep, the newest")
	_ = fs.Parse(os.Args[2:])
	e.inputs = strings.Fields(*inputs)
	e.outputs = fs.Args()
	e.recipe = os.Getenv(recipeEnv)
	if e.name == "" || len(e.outputs) == 0 || e.recipe == "" {
		fmt.Fprintf(os.Stderr, "toolcache %s: -name, an output and %s are required\n", cmd, recipeEnv)
		os.Exit(2)
	}
	if e.cache == "" {
		os.Exit(1)
	}
	var err error
	if cmd == "restore" {
		err = e.restore()
		if errors.Is(err, errMiss) {
			os.Exit(1)
		}
	} else {
		err = e.save(*keep)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "toolcache %s %s: %v\n", cmd, e.name, err)
		os.Exit(1)
	}
}

var errMiss = errors.New("not in the cache")

type entry struct {
	cache, bin, name, recipe string
	inputs, outputs          []string
	// goEnv answers for the toolchain; nil runs the go command.
	goEnv func(dir string) (string, error)
}

// material is what the key is the hash of, as text: recipe.txt.
func (e *entry) material() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "recipe: %s\n", e.recipe)
	dir := "."
	if len(e.inputs) > 0 {
		dir = filepath.Dir(e.inputs[0])
	}
	goEnv := e.goEnv
	if goEnv == nil {
		goEnv = runGoEnv
	}
	env, err := goEnv(dir)
	if err != nil {
		return "", err
	}
	b.WriteString(env)
	for _, in := range e.inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "input %s: %s\n", filepath.ToSlash(in), hex.EncodeToString(sum[:]))
	}
	return b.String(), nil
}

func runGoEnv(dir string) (string, error) {
	cmd := exec.Command("go", append([]string{"env"}, goEnvVars...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env in %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(goEnvVars) {
		return "", fmt.Errorf("go env in %s: %d lines for %d variables", dir, len(lines), len(goEnvVars))
	}
	var b strings.Builder
	for i, v := range goEnvVars {
		fmt.Fprintf(&b, "%s=%s\n", v, lines[i])
	}
	return b.String(), nil
}

// dir is the entry's directory, and the material its key is made of.
func (e *entry) dir() (string, string, error) {
	m, err := e.material()
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256([]byte(m))
	return filepath.Join(e.cache, e.name+"-"+hex.EncodeToString(sum[:12])), m, nil
}

func (e *entry) restore() error {
	dir, _, err := e.dir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "recipe.txt")); err != nil {
		return errMiss
	}
	for _, out := range e.outputs {
		if err := copyFile(filepath.Join(dir, "files", out), filepath.Join(e.bin, out)); err != nil {
			return err
		}
	}
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	fmt.Printf(">> %s: %s from the tool cache (%s)\n", e.name, strings.Join(e.outputs, ", "), dir)
	return nil
}

func (e *entry) save(keep int) error {
	dir, material, err := e.dir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(e.cache, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(e.cache, ".new-"+e.name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for _, out := range e.outputs {
		if err := copyFile(filepath.Join(e.bin, out), filepath.Join(tmp, "files", out)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "recipe.txt"), []byte(material), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(dir) // an entry left incomplete by hand; save's own are whole
	if err := os.Rename(tmp, dir); err != nil {
		// Another make saved the same entry meanwhile: it is as good.
		if _, statErr := os.Stat(filepath.Join(dir, "recipe.txt")); statErr != nil {
			return err
		}
	}
	return prune(e.cache, e.name, keep)
}

// prune removes the entries of name but the keep newest.
func prune(cache, name string, keep int) error {
	des, err := os.ReadDir(cache)
	if err != nil {
		return err
	}
	type aged struct {
		path string
		mod  time.Time
	}
	var entries []aged
	for _, de := range des {
		n := de.Name()
		key, ok := strings.CutPrefix(n, name+"-")
		if !ok || !de.IsDir() || len(key) != 24 {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		entries = append(entries, aged{filepath.Join(cache, n), info.ModTime()})
	}
	slices.SortFunc(entries, func(a, b aged) int { return b.mod.Compare(a.mod) })
	for i := keep; i < len(entries); i++ {
		if err := os.RemoveAll(entries[i].path); err != nil {
			return err
		}
	}
	return nil
}

// copyFile writes a new dst beside it and renames it into place: a process
// running the old dst keeps it, and no dst is ever half written.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	// After the rename there is nothing left to remove.
	defer func() { _ = os.Remove(out.Name()) }()
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(info.Mode().Perm())
	}
	if err = errors.Join(err, out.Close()); err != nil {
		return err
	}
	return os.Rename(out.Name(), dst)
}
