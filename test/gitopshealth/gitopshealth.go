// Package gitopshealth computes the health that GitOps tools show of
// flagplane's objects, from the checks flagplane ships for them:
//
//   - Argo runs the Argo CD health check (a Lua script under
//     config/gitops/argocd/resource_customizations/<group>/<Kind>/health.lua)
//     as Argo CD runs it, and returns Argo CD's status and message.
//   - Flux evaluates the Flux Kustomization health check expressions
//     (config/gitops/flux/healthcheckexprs.yaml) as Flux's kustomize-controller
//     does, and returns kstatus's status.
//
// It is a plain library for tests: the integration specs call it on live
// objects, and its own tests check the files' examples (each health_test.yaml,
// as Argo CD's TestLuaHealthScript does) and that the argocd-cm snippets
// hold the same scripts as the health.lua files.
//
// Argo CD's own packages are not used: from v3.3 its module replaces its
// gitops-engine requirement with a directory of its own repository (a
// version the module proxy does not serve) and pins k8s.io
// modules below this repository's; v3.2's gitops-engine imports k8s.io/api
// packages that v0.37 no longer has. Both checks are therefore evaluated
// here with the libraries and settings Argo CD and Flux use: gopher-lua
// with the Lua libraries Argo CD opens, cel-go with Flux's CEL environment.
package gitopshealth

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// Paths of the checks, relative to the repository root.
const (
	// ArgoCustomizationsDir holds Argo CD's resource_customizations layout:
	// <group>/<Kind>/health.lua, health_test.yaml and testdata/.
	ArgoCustomizationsDir = "config/gitops/argocd/resource_customizations"
	// ArgoCMSnippet is the argocd-cm data fragment with the same scripts.
	ArgoCMSnippet = "config/gitops/argocd/argocd-cm-health.yaml"
	// ChartArgoCMSnippet is the chart's copy of ArgoCMSnippet.
	ChartArgoCMSnippet = "charts/flagplane/files/argocd-cm-health.yaml"
	// FluxHealthCheckExprs is the list for a Kustomization's
	// spec.healthCheckExprs.
	FluxHealthCheckExprs = "config/gitops/flux/healthcheckexprs.yaml"
)

var rootOnce = sync.OnceValues(findRoot)

// RepoRoot returns the repository's root directory: the first directory
// with a go.mod above this package's source, else above the working
// directory.
func RepoRoot() (string, error) {
	return rootOnce()
}

func findRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("gitopshealth: no go.mod above the package's source or the working directory")
}

// fromRoot joins rel (slash-separated) to the repository root.
func fromRoot(rel string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}
