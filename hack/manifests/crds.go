package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// crdKustomizations are the kustomizations that install CRDs, each with the
// glob, relative to it, of the CRDs controller-gen writes for it.
var crdKustomizations = []struct{ dir, glob string }{
	{"config/crd", "bases/*.yaml"},
	{"config/fleet/crd", "*.yaml"},
}

// syncCRDResources makes each CRD kustomization list the CRDs there are:
// those it lists and that still exist keep their place, those it lacks
// are added at the end (sorted), and those gone are dropped. A new kind's
// CRD is installed without an edit by hand; the file's comments and the
// rest of it are kept.
func (g *generator) syncCRDResources() error {
	for _, k := range crdKustomizations {
		path := filepath.Join(k.dir, "kustomization.yaml")
		b, err := os.ReadFile(g.path(path))
		if err != nil {
			return err
		}
		files, err := filepath.Glob(g.path(k.dir, k.glob))
		if err != nil {
			return err
		}
		var crds []string
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			rel, err := filepath.Rel(g.path(k.dir), f)
			if err != nil {
				return err
			}
			crds = append(crds, filepath.ToSlash(rel))
		}
		out, err := withResources(string(b), crds)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := g.write(path, []byte(out)); err != nil {
			return err
		}
	}
	return nil
}

// withResources rewrites the resources list of a kustomization (a
// "resources:" line followed by "- item" lines) to hold exactly have.
func withResources(kustomization string, have []string) (string, error) {
	lines := strings.SplitAfter(kustomization, "\n")
	start := slices.Index(lines, "resources:\n")
	if start < 0 {
		return "", fmt.Errorf("no resources: list")
	}
	end := start + 1
	var listed []string
	for ; end < len(lines) && strings.HasPrefix(lines[end], "- "); end++ {
		listed = append(listed, strings.TrimSpace(strings.TrimPrefix(lines[end], "- ")))
	}
	var keep []string
	for _, r := range listed {
		if slices.Contains(have, r) {
			keep = append(keep, r)
		}
	}
	var added []string
	for _, r := range have {
		if !slices.Contains(keep, r) {
			added = append(added, r)
		}
	}
	slices.Sort(added)
	var b strings.Builder
	for _, l := range lines[:start+1] {
		b.WriteString(l)
	}
	for _, r := range append(keep, added...) {
		b.WriteString("- " + r + "\n")
	}
	for _, l := range lines[end:] {
		b.WriteString(l)
	}
	return b.String(), nil
}
