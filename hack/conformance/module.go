package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ofoModulePath is the OpenFeature Operator's module. Its zip, as the Go
// module proxy serves it, holds the e2e suite (test/e2e/chainsaw,
// .chainsaw.yaml) and the chart whose flagd tag the suite asserts; its
// api module is a module of its own, not in the zip, which the suite does
// not need.
const ofoModulePath = "github.com/open-feature/open-feature-operator"

// ofoModule downloads OFO's module at version through the Go module proxy
// and returns a writable copy of it under dir (the module cache is
// read-only, and a suite is run from the folder it lives in). A copy made
// before is used as it is.
func ofoModule(ctx context.Context, version, dir string) (string, error) {
	dest := filepath.Join(dir, "open-feature-operator@"+version)
	if _, err := os.Stat(filepath.Join(dest, ".chainsaw.yaml")); err == nil {
		if _, err := os.Stat(filepath.Join(dest, "go.mod")); err != nil {
			return dest, nil
		}
		// A copy of an earlier layout, with its Go files: made again.
	}
	// Outside of any module: `go mod download` then edits no go.mod.
	tmp, err := os.MkdirTemp("", "flagplane-ofo-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", ofoModulePath+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var got struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || runErr != nil || got.Error != "" || got.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", ofoModulePath, version, runErr, got.Error, stderr.String())
	}
	// Without its Go files: the run reads manifests and the chart only, and
	// a go.mod or Go package under the repository would join the tools'
	// ./... (controller-gen walks into every nested module it finds).
	if err := copyTree(got.Dir, dest+".partial", goFile); err != nil {
		return "", err
	}
	if err := os.Rename(dest+".partial", dest); err != nil {
		return "", err
	}
	return dest, nil
}

// goFile tells the files of a Go module that are Go's: sources and the
// module's files.
func goFile(name string) bool {
	return strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" || name == "go.work"
}

// copyTree copies the regular files and folders of src to dest, writable
// by their owner, but for the folders named skip and the files leave
// tells (when not nil); what was at dest before is removed first.
func copyTree(src, dest string, leave func(name string) bool, skip ...string) error {
	if err := os.RemoveAll(dest); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dest, rel)
		switch {
		case d.IsDir() && path != src && slices.Contains(skip, d.Name()):
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular() && leave != nil && leave(d.Name()):
			return nil
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		default:
			return nil // a module zip holds regular files only
		}
	})
}
