package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain keeps the tests off the kubeconfig of whoever runs them: the
// default one is a file that does not exist, and no pod's service account
// is at hand.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flagplane-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	os.Unsetenv("KUBERNETES_SERVICE_HOST")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
