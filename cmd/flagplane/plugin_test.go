package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestKubectlPlugin: the real kubectl (bin/kubectl, of make controlplane)
// finds the CLI built as kubectl-flagplane on PATH, runs it for
// `kubectl flagplane ...` and completes it through
// kubectl_complete-flagplane. No cluster is needed.
func TestKubectlPlugin(t *testing.T) {
	g := NewWithT(t)
	kubectl, err := filepath.Abs(filepath.Join("..", "..", "bin", "kubectl"))
	g.Expect(err).NotTo(HaveOccurred())
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no kubectl to run the plugin (make controlplane builds bin/kubectl): %v", err)
	}
	testdata, err := filepath.Abs(filepath.Join("..", "..", "inspect", "explain", "testdata"))
	g.Expect(err).NotTo(HaveOccurred())

	// Built as make plugin builds it.
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-flagplane"), ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "building kubectl-flagplane: %s", out)
	g.Expect(os.Symlink("kubectl-flagplane", filepath.Join(dir, "kubectl_complete-flagplane"))).To(Succeed())

	kubectlRun := func(args ...string) (string, string, error) {
		cmd := exec.Command(kubectl, args...)
		// Only the plugin's folder on PATH; no kubeconfig.
		cmd.Env = []string{"PATH=" + dir, "HOME=" + t.TempDir(), "KUBECONFIG=" + filepath.Join(dir, "none")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	stdout, stderr, err := kubectlRun("plugin", "list")
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(stdout).To(ContainSubstring(filepath.Join(dir, "kubectl-flagplane")))
	g.Expect(stderr).NotTo(ContainSubstring("warning"))

	stdout, stderr, err = kubectlRun("flagplane", "explain", "deploy/web", "-n", "shop", "--from-dir", testdata)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	want, err := os.ReadFile(filepath.Join("testdata", "golden", "explain-deploy-web.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(Equal(string(want)), "the same explanation as flagplane explain")

	stdout, _, err = kubectlRun("flagplane", "explain", "--help")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(ContainSubstring("Usage:\n  kubectl flagplane explain KIND/NAME [flags]"))

	_, stderr, err = kubectlRun("flagplane", "explain", "deploy/web", "-o", "wide", "--from-dir", testdata)
	var exit *exec.ExitError
	g.Expect(err).To(BeAssignableToTypeOf(exit))
	g.Expect(err.(*exec.ExitError).ExitCode()).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring(`unknown -o "wide": use one of text, json, yaml`))
	g.Expect(stderr).To(ContainSubstring("See 'kubectl flagplane explain --help'."))

	// kubectl completes the plugin's name, then asks kubectl_complete-flagplane.
	stdout, stderr, err = kubectlRun("__complete", "flagp")
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(stdout).To(HavePrefix("flagplane\t"))
	stdout, stderr, err = kubectlRun("__complete", "flagplane", "explain", "--from-dir", testdata, "-n", "shop", "deploy/w")
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(strings.Split(strings.TrimSpace(stdout), "\n")).To(Equal([]string{"deploy/web", ":4"}))
}
