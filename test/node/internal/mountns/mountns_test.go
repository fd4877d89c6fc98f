package mountns_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/test/node/internal/mountns"
)

func TestMain(m *testing.M) {
	if err := mountns.Check(os.TempDir()); err != nil {
		// Say why, rather than failing every test with the same cause.
		println("mountns: skipping, no mount namespaces here:", err.Error())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// run runs spec and returns its output and the start error.
func run(t *testing.T, spec mountns.Spec) (string, error, error) {
	t.Helper()
	spec.Scratch = t.TempDir()
	cmd, report, err := mountns.Command("mountns-test", spec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		report.Close()
		t.Fatal(err)
	}
	startErr := report.Wait()
	waitErr := cmd.Wait()
	return out.String(), startErr, waitErr
}

func TestExecSeesVolumesAtMissingMountPointsWithoutTouchingTheHost(t *testing.T) {
	g := NewWithT(t)
	vol := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(vol, "flags.json"), []byte("flags!"), 0o644)).To(Succeed())
	root := "/etc/flagplane-mountns-test-" + filepath.Base(t.TempDir())
	target := filepath.Join(root, "ns_name")

	out, startErr, waitErr := run(t, mountns.Spec{
		Mode: mountns.ModeExec, Path: "/bin/sh",
		Args:   []string{"-c", "cat " + target + "/flags.json; echo; test -e /etc/passwd && echo passwd-still-there; touch " + target + "/x 2>/dev/null || echo read-only"},
		Env:    []string{"PATH=/usr/bin:/bin"},
		Mounts: []mountns.Mount{{Source: vol, Target: target, ReadOnly: true}},
	})
	g.Expect(startErr).NotTo(HaveOccurred())
	g.Expect(waitErr).NotTo(HaveOccurred(), out)
	g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(Equal([]string{"flags!", "passwd-still-there", "read-only"}))
	g.Expect(root).NotTo(BeADirectory(), "the mount point was created on the host")
}

func TestExecRunsAsTheContainerUser(t *testing.T) {
	g := NewWithT(t)
	uid, gid := 65532, 65532
	out, startErr, waitErr := run(t, mountns.Spec{
		Mode: mountns.ModeExec, Path: "/bin/sh", Args: []string{"-c", "id -u; id -g; id -G"},
		UID: &uid, GID: &gid, Groups: []int{2000},
	})
	g.Expect(startErr).NotTo(HaveOccurred())
	g.Expect(waitErr).NotTo(HaveOccurred(), out)
	g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(Equal([]string{"65532", "65532", "65532 2000"}))
}

func TestStartErrorsAreReported(t *testing.T) {
	g := NewWithT(t)
	_, startErr, waitErr := run(t, mountns.Spec{Mode: mountns.ModeExec, Path: "/no/such/binary"})
	g.Expect(startErr).To(MatchError(ContainSubstring("exec /no/such/binary")))
	var exit *exec.ExitError
	g.Expect(waitErr).To(BeAssignableToTypeOf(exit))

	_, startErr, _ = run(t, mountns.Spec{Mode: mountns.ModeExec, Path: "/bin/true",
		Mounts: []mountns.Mount{{Source: t.TempDir(), Target: "/flagplane-no-such-top-level/x"}}})
	g.Expect(startErr).To(MatchError(ContainSubstring("cannot be created")))
}
