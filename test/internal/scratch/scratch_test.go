package scratch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary a child that makes a directory with the
// prefix it names, prints its path and exits without removing it, as a
// run that dies does.
const childEnv = "SCRATCH_TEST_CHILD_PREFIX"

func TestMain(m *testing.M) {
	if prefix := os.Getenv(childEnv); prefix != "" {
		d, err := Make(prefix)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Print(d.Path)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReap: a directory whose process died is removed by the next Make of
// its prefix; one whose process lives, one kept, and one without a lock
// file are not.
func TestReap(t *testing.T) {
	prefix := fmt.Sprintf("flagplane-scratch-test-%d-", time.Now().UnixNano())
	t.Cleanup(func() {
		matches, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
		for _, m := range matches {
			_ = os.RemoveAll(m)
		}
	})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+prefix)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child: %v", err)
	}
	dead := string(out)
	if !strings.HasPrefix(filepath.Base(dead), prefix) {
		t.Fatalf("the child made %q", dead)
	}

	live, err := Make(prefix)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := Make(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.Keep(); err != nil {
		t.Fatal(err)
	}
	foreign, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead child's directory %s is still there after a Make of its prefix: %v", dead, err)
	}
	removed, err := Reap(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 0 {
		t.Errorf("Reap removed %v, want nothing: the others' process lives, or they have no lock", removed)
	}
	for _, dir := range []string{live.Path, kept.Path, foreign} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
	if err := live.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Path); !os.IsNotExist(err) {
		t.Errorf("Remove left %s: %v", live.Path, err)
	}
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	if !slices.Equal(slices.Sorted(slices.Values(matches)), slices.Sorted(slices.Values([]string{kept.Path, foreign}))) {
		t.Errorf("left: %v, want the kept and the foreign directory", matches)
	}
}
