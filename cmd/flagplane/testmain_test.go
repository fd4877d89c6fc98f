package main

import (
	"errors"
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
	if err := errors.Join(os.Setenv("KUBECONFIG", filepath.Join(dir, "none")),
		os.Unsetenv("KUBERNETES_SERVICE_HOST")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
