// Command argocdhealth checks Argo CD health checks laid out as Argo CD's
// resource_customizations (<group>/<Kind>/health.lua, health_test.yaml and
// testdata/) with Argo CD's own code: its util/lua package and
// gitops-engine's health assessment, at the version this module requires.
//
//	argocdhealth <resource_customizations dir>
//
// Each case of each health_test.yaml is run two ways, and both must give
// the expected status and message:
//
//   - test: as Argo CD's TestLuaHealthScript runs its built-in scripts (the
//     object read from YAML, the Lua standard libraries open), with the
//     script found by the VM's GetHealthScript under the object's key and
//     run by ExecuteHealthLua;
//   - controller: as the application controller assesses a live object with
//     the script configured in argocd-cm (useOpenLibs off, the default):
//     gitops-engine's health.GetResourceHealth with
//     lua.ResourceHealthOverrides, on the object as a client decodes it
//     from JSON.
//
// It prints one line per case and exits 1 on any mismatch or error.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/gitops-engine/pkg/health"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// healthTests is a health_test.yaml, as Argo CD's util/lua test reads it.
type healthTests struct {
	Tests []struct {
		InputPath    string              `json:"inputPath"`
		HealthStatus health.HealthStatus `json:"healthStatus"`
	} `json:"tests"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocdhealth <resource_customizations dir>")
		os.Exit(2)
	}
	failed, err := run(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocdhealth:", err)
		os.Exit(1)
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// run checks every health_test.yaml under dir and returns how many cases
// failed.
func run(dir string) (int, error) {
	var testFiles []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "health_test.yaml" {
			testFiles = append(testFiles, path)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(testFiles) == 0 {
		return 0, fmt.Errorf("no health_test.yaml under %s", dir)
	}
	sort.Strings(testFiles)
	failed, cases := 0, 0
	for _, f := range testFiles {
		n, bad, err := checkKind(dir, filepath.Dir(f))
		if err != nil {
			return 0, err
		}
		cases += n
		failed += bad
	}
	fmt.Printf("argocdhealth: %d case(s) in %d health_test.yaml, %d failed\n", cases, len(testFiles), failed)
	return failed, nil
}

// checkKind runs the cases of one kind's directory: its key (group/Kind,
// or Kind for the core group) is its path under root.
func checkKind(root, kindDir string) (cases, failed int, err error) {
	rel, err := filepath.Rel(root, kindDir)
	if err != nil {
		return 0, 0, err
	}
	key := filepath.ToSlash(rel)
	script, err := os.ReadFile(filepath.Join(kindDir, "health.lua"))
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(filepath.Join(kindDir, "health_test.yaml"))
	if err != nil {
		return 0, 0, err
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(b, &tests); err != nil {
		return 0, 0, fmt.Errorf("%s/health_test.yaml: %w", key, err)
	}
	if len(tests.Tests) == 0 {
		return 0, 0, fmt.Errorf("%s/health_test.yaml has no tests", key)
	}
	// The script as argocd-cm configures it: resource.customizations with
	// health.lua under the key, useOpenLibs left off.
	overrides := map[string]v1alpha1.ResourceOverride{key: {HealthLua: string(script)}}
	for _, tc := range tests.Tests {
		name := key + "/" + tc.InputPath
		raw, err := os.ReadFile(filepath.Join(kindDir, filepath.FromSlash(tc.InputPath)))
		if err != nil {
			return 0, 0, err
		}
		fromYAML, fromJSON, err := decode(raw)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		if got := lua.GetConfigMapKey(fromYAML.GroupVersionKind()); got != key {
			return 0, 0, fmt.Errorf("%s: the object's key is %s, not its directory's", name, got)
		}
		want := tc.HealthStatus
		var mismatches []string
		for _, way := range []struct {
			name string
			run  func() (*health.HealthStatus, error)
		}{
			{"test", func() (*health.HealthStatus, error) {
				vm := lua.VM{ResourceOverrides: overrides, UseOpenLibs: true}
				s, _, err := vm.GetHealthScript(fromYAML)
				if err != nil {
					return nil, err
				}
				return vm.ExecuteHealthLua(fromYAML, s)
			}},
			{"controller", func() (*health.HealthStatus, error) {
				return health.GetResourceHealth(fromJSON, lua.ResourceHealthOverrides(overrides))
			}},
		} {
			got, err := way.run()
			switch {
			case err != nil:
				mismatches = append(mismatches, fmt.Sprintf("%s: error: %v", way.name, err))
			case got == nil || *got != want:
				mismatches = append(mismatches, fmt.Sprintf("%s: got %s, want %s", way.name, show(got), show(&want)))
			}
		}
		cases++
		if len(mismatches) == 0 {
			fmt.Printf("ok    %s: %s\n", name, show(&want))
			continue
		}
		failed++
		fmt.Printf("FAIL  %s: %s\n", name, strings.Join(mismatches, "; "))
	}
	return cases, failed, nil
}

// decode reads an object two ways: as Argo CD's test does (YAML into a map,
// numbers float64) and as the controller gets it from the API server (JSON
// into unstructured, integers int64).
func decode(raw []byte) (fromYAML, fromJSON *unstructured.Unstructured, err error) {
	obj := map[string]any{}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, nil, err
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, nil, err
	}
	fromJSON = &unstructured.Unstructured{}
	if err := fromJSON.UnmarshalJSON(js); err != nil {
		return nil, nil, err
	}
	return &unstructured.Unstructured{Object: obj}, fromJSON, nil
}

func show(h *health.HealthStatus) string {
	if h == nil {
		return "no health"
	}
	return fmt.Sprintf("%s %q", h.Status, h.Message)
}
