package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fakeGoEnv(version string) func(string) (string, error) {
	return func(string) (string, error) { return "GOVERSION=" + version + "\n", nil }
}

// newEntry is an entry of a tool whose one input and two outputs are files
// of a temporary directory; the outputs are written.
func newEntry(t *testing.T) *entry {
	t.Helper()
	dir := t.TempDir()
	e := &entry{
		cache:   filepath.Join(dir, "cache"),
		bin:     filepath.Join(dir, "bin"),
		name:    "tool",
		recipe:  "cd hack/tools/tool && go build -o bin/tool .",
		inputs:  []string{filepath.Join(dir, "go.mod")},
		outputs: []string{"tool", "sub/other"},
		goEnv:   fakeGoEnv("go1.26.0"),
	}
	write(t, e.inputs[0], "module tool\n", 0o644)
	write(t, filepath.Join(e.bin, "tool"), "binary one", 0o755)
	write(t, filepath.Join(e.bin, "sub/other"), "binary two", 0o755)
	return e
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func key(t *testing.T, e *entry) string {
	t.Helper()
	dir, _, err := e.dir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(dir)
}

func TestKeyChangesWithEachPartOfIt(t *testing.T) {
	e := newEntry(t)
	base := key(t, e)
	if again := key(t, e); again != base {
		t.Fatalf("the same entry has two keys: %s, %s", base, again)
	}
	changes := map[string]func(){
		"recipe":    func() { e.recipe += " -tags x" },
		"input":     func() { write(t, e.inputs[0], "module tool\n\nrequire x v1.0.1\n", 0o644) },
		"toolchain": func() { e.goEnv = fakeGoEnv("go1.26.1") },
	}
	seen := map[string]string{base: "nothing"}
	for what, change := range changes {
		change()
		k := key(t, e)
		if prev, ok := seen[k]; ok {
			t.Errorf("after a change of the %s the key is the one after %s: %s", what, prev, k)
		}
		seen[k] = what
	}
}

func TestSaveThenRestore(t *testing.T) {
	e := newEntry(t)
	if err := e.restore(); !errors.Is(err, errMiss) {
		t.Fatalf("restore from an empty cache: %v, want a miss", err)
	}
	if err := e.save(2); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.bin); err != nil {
		t.Fatal(err)
	}
	if err := e.restore(); err != nil {
		t.Fatal(err)
	}
	for out, want := range map[string]string{"tool": "binary one", "sub/other": "binary two"} {
		path := filepath.Join(e.bin, out)
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", out, got, err, want)
		}
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, %v; want 0755", out, info.Mode(), err)
		}
	}
	material, err := os.ReadFile(filepath.Join(e.cache, key(t, e), "recipe.txt"))
	if err != nil || !strings.Contains(string(material), e.recipe) {
		t.Errorf("recipe.txt %q, %v: want the recipe in it", material, err)
	}

	// Another version of the input is another entry.
	write(t, e.inputs[0], "module tool\n\nrequire x v1.0.1\n", 0o644)
	if err := e.restore(); !errors.Is(err, errMiss) {
		t.Fatalf("restore after the input changed: %v, want a miss", err)
	}
}

func TestSaveKeepsTheNewestEntries(t *testing.T) {
	e := newEntry(t)
	var keys []string
	for i := range 3 {
		write(t, e.inputs[0], "module tool // "+string(rune('a'+i))+"\n", 0o644)
		if err := e.save(2); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key(t, e))
		// Entries are told apart by their times; let each be older.
		old := time.Now().Add(-time.Duration(10-i) * time.Minute)
		if err := os.Chtimes(filepath.Join(e.cache, keys[i]), old, old); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		_, err := os.Stat(filepath.Join(e.cache, k))
		if kept := err == nil; kept != (i > 0) {
			t.Errorf("entry %d (%s) kept: %v, want %v", i, k, kept, i > 0)
		}
	}
	if des, _ := os.ReadDir(e.cache); len(des) != 2 {
		t.Errorf("the cache holds %d entries, want 2 (no temporary ones)", len(des))
	}
}

// TestMakeRestoresAToolInAnotherBin runs the Makefile's own rule of a tool
// (crane, the smallest) twice, into two bin/ directories that share one
// cache: the first builds it and saves it, the second copies it from the
// cache and compiles nothing, as a fresh clone does.
func TestMakeRestoresAToolInAnotherBin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds crane with the go command")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	run := func(bin string) string {
		cmd := exec.Command("make", "--no-print-directory", "-C", root, "crane", "BIN="+bin, "TOOL_CACHE="+cache)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("make crane BIN=%s: %v\n%s", bin, err, out.String())
		}
		if err := exec.Command(filepath.Join(bin, "crane"), "--help").Run(); err != nil {
			t.Fatalf("bin/crane after make crane BIN=%s: %v\n%s", bin, err, out.String())
		}
		return out.String()
	}
	first := run(t.TempDir())
	if !strings.Contains(first, ">> building crane") {
		t.Fatalf("the first make crane, on an empty cache, did not build it:\n%s", first)
	}
	second := run(t.TempDir())
	if strings.Contains(second, ">> building crane") || !strings.Contains(second, "crane from the tool cache") {
		t.Fatalf("the second make crane, into another bin/, did not copy it from the cache:\n%s", second)
	}
}
