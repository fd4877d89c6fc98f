package gitopshealth

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "write the argocd-cm snippets from the health.lua files")

// kinds are the kinds flagplane serves: each has an Argo CD health check
// and Flux health check expressions.
var kinds = []schema.GroupKind{
	{Group: "core.openfeature.dev", Kind: "FeatureFlag"},
	{Group: "core.openfeature.dev", Kind: "FeatureFlagSource"},
	{Group: "core.openfeature.dev", Kind: "Flagd"},
	{Group: "core.openfeature.dev", Kind: "InProcessConfiguration"},
	{Group: "policy.flagplane.dev", Kind: "FeatureFlagSourcePolicy"},
	{Group: "delivery.flagplane.dev", Kind: "FeatureFlagRolloutPolicy"},
}

// healthTests is a health_test.yaml, Argo CD's format.
type healthTests struct {
	Tests []struct {
		HealthStatus Result `json:"healthStatus"`
		InputPath    string `json:"inputPath"`
	} `json:"tests"`
}

// healthCase is a test of a health_test.yaml, with its object read both
// ways: as Argo CD's test reads it (YAML into a map: float64 numbers) and
// as a client gets it from the API server (JSON into unstructured: int64).
type healthCase struct {
	gk       schema.GroupKind
	script   string
	name     string
	want     Result
	asYAML   map[string]any
	asClient *unstructured.Unstructured
}

func readHealthCases(t *testing.T) []healthCase {
	t.Helper()
	scripts, err := argoHealthScripts()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := fromRoot(ArgoCustomizationsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []healthCase
	for _, gk := range kinds {
		script, ok := scripts[gk]
		if !ok {
			t.Errorf("%s has no health.lua under %s", gk, ArgoCustomizationsDir)
			continue
		}
		kindDir := filepath.Join(dir, filepath.FromSlash(argoKey(gk)))
		b, err := os.ReadFile(filepath.Join(kindDir, "health_test.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var tests healthTests
		if err := yaml.UnmarshalStrict(b, &tests); err != nil {
			t.Fatalf("%s/health_test.yaml: %v", argoKey(gk), err)
		}
		if len(tests.Tests) == 0 {
			t.Errorf("%s/health_test.yaml has no tests", argoKey(gk))
		}
		listed := map[string]bool{}
		for _, tc := range tests.Tests {
			listed[filepath.ToSlash(filepath.Clean(tc.InputPath))] = true
			raw, err := os.ReadFile(filepath.Join(kindDir, filepath.FromSlash(tc.InputPath)))
			if err != nil {
				t.Fatal(err)
			}
			asYAML := map[string]any{}
			if err := yaml.Unmarshal(raw, &asYAML); err != nil {
				t.Fatalf("%s/%s: %v", argoKey(gk), tc.InputPath, err)
			}
			js, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			asClient := &unstructured.Unstructured{}
			if err := asClient.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s/%s: %v", argoKey(gk), tc.InputPath, err)
			}
			if got := asClient.GroupVersionKind().GroupKind(); got != gk {
				t.Errorf("%s/%s is a %s", argoKey(gk), tc.InputPath, got)
			}
			out = append(out, healthCase{gk: gk, script: script, name: argoKey(gk) + "/" + tc.InputPath,
				want: tc.HealthStatus, asYAML: asYAML, asClient: asClient})
		}
		// Every testdata file is a test: names stay listed.
		files, err := filepath.Glob(filepath.Join(kindDir, "testdata", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if rel := "testdata/" + filepath.Base(f); !listed[rel] {
				t.Errorf("%s/%s is not in health_test.yaml", argoKey(gk), rel)
			}
		}
	}
	for gk := range scripts {
		if !slices.Contains(kinds, gk) {
			t.Errorf("%s has a health.lua and is not a kind of flagplane's", gk)
		}
	}
	return out
}

// TestArgoHealthChecks is Argo CD's TestLuaHealthScript on flagplane's
// checks: each health_test.yaml's status and message, with the Lua
// standard libraries open (as Argo CD runs its built-in scripts) and off
// (as it runs argocd-cm's by default), on the object as read from YAML and
// as a client reads it.
func TestArgoHealthChecks(t *testing.T) {
	for _, c := range readHealthCases(t) {
		t.Run(c.name, func(t *testing.T) {
			for _, openLibs := range []bool{true, false} {
				got, err := runArgoHealth(c.script, c.asYAML, openLibs)
				if err != nil {
					t.Fatalf("openLibs=%v: %v", openLibs, err)
				}
				if got != c.want {
					t.Errorf("openLibs=%v: got %+v, want %+v", openLibs, got, c.want)
				}
			}
			got, err := Argo(c.asClient)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Argo on the object as a client reads it: got %+v, want %+v", got, c.want)
			}
		})
	}
}

// fluxFor is the Flux status of each Argo CD status of flagplane's checks:
// a rollout policy waiting for a person is Suspended to Argo CD, and Flux,
// like kstatus, has no such status.
var fluxFor = map[string]string{Healthy: Current, Progressing: InProgress, Suspended: InProgress, Degraded: Failed}

// TestFluxHealthCheckExprs evaluates the Flux expressions on the Argo CD
// checks' objects, as a client reads them: the same verdicts. An object
// without status is the exception: Flux's CEL fails on an absent top-level
// field, and Flux reports Unknown and waits on it as on InProgress.
func TestFluxHealthCheckExprs(t *testing.T) {
	for _, c := range readHealthCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got, err := Flux(c.asClient)
			if _, hasStatus := c.asClient.Object["status"]; !hasStatus {
				if err == nil || got != FluxUnknown {
					t.Fatalf("without status: got %q, %v; want Unknown and an error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := fluxFor[c.want.Status]; got != want {
				t.Errorf("got %s, want %s (Argo CD: %s)", got, want, c.want.Status)
			}
		})
	}
}

// TestFluxHealthCheckExprsCoverTheKinds: one entry per kind, and the file
// parses as Flux parses it.
func TestFluxHealthCheckExprsCoverTheKinds(t *testing.T) {
	evaluators, err := loadFluxHealthChecks()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for gk := range evaluators {
		got = append(got, gk.String())
	}
	var want []string
	for _, gk := range kinds {
		want = append(want, gk.String())
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries for %v, want %v", got, want)
	}
}

// TestArgoAndFluxAgree runs both checks on states the testdata do not
// hold, derived from each kind's healthy object.
func TestArgoAndFluxAgree(t *testing.T) {
	cases := readHealthCases(t)
	setCond := func(o *unstructured.Unstructured, typ string, edit func(c map[string]any)) {
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == typ {
				edit(m)
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, conds, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
	}
	dropCond := func(o *unstructured.Unstructured, typ string) {
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		conds = slices.DeleteFunc(conds, func(c any) bool { return c.(map[string]any)["type"] == typ })
		if err := unstructured.SetNestedSlice(o.Object, conds, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
	}
	readyMessage := func(o *unstructured.Unstructured) string {
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" {
				return m["message"].(string)
			}
		}
		return ""
	}
	variants := []struct {
		name string
		edit func(o *unstructured.Unstructured)
		want func(o *unstructured.Unstructured) Result
	}{{
		name: "no Ready condition (a flagplane older than the summary conditions)",
		edit: func(o *unstructured.Unstructured) {
			for _, typ := range []string{"Ready", "Reconciling", "Stalled"} {
				dropCond(o, typ)
			}
		},
		want: func(*unstructured.Unstructured) Result {
			return Result{Progressing, "Waiting for flagplane to set the Ready condition"}
		},
	}, {
		name: "no conditions",
		edit: func(o *unstructured.Unstructured) { unstructured.RemoveNestedField(o.Object, "status", "conditions") },
		want: func(*unstructured.Unstructured) Result {
			return Result{Progressing, "Waiting for flagplane to set the Ready condition"}
		},
	}, {
		name: "Ready of an older generation",
		edit: func(o *unstructured.Unstructured) {
			setCond(o, "Ready", func(c map[string]any) { c["observedGeneration"] = o.GetGeneration() - 1 })
		},
		want: func(o *unstructured.Unstructured) Result {
			return Result{Progressing, "Waiting for flagplane to observe generation 1"}
		},
	}, {
		name: "Ready without observedGeneration",
		edit: func(o *unstructured.Unstructured) {
			setCond(o, "Ready", func(c map[string]any) { delete(c, "observedGeneration") })
		},
		want: func(o *unstructured.Unstructured) Result {
			return Result{Progressing, "Waiting for flagplane to observe generation 1"}
		},
	}, {
		name: "Ready False, neither Reconciling nor Stalled True",
		edit: func(o *unstructured.Unstructured) {
			setCond(o, "Ready", func(c map[string]any) { c["status"] = "False" })
		},
		want: func(o *unstructured.Unstructured) Result { return Result{Progressing, readyMessage(o)} },
	}, {
		name: "Ready Unknown",
		edit: func(o *unstructured.Unstructured) {
			setCond(o, "Ready", func(c map[string]any) { c["status"] = "Unknown" })
		},
		want: func(o *unstructured.Unstructured) Result { return Result{Progressing, readyMessage(o)} },
	}, {
		name: "Reconciling and Stalled True: Reconciling decides, as in Flux's order",
		edit: func(o *unstructured.Unstructured) {
			setCond(o, "Ready", func(c map[string]any) { c["status"] = "False" })
			setCond(o, "Reconciling", func(c map[string]any) { c["status"], c["message"] = "True", "reconciling" })
			setCond(o, "Stalled", func(c map[string]any) { c["status"], c["message"] = "True", "stalled" })
		},
		want: func(*unstructured.Unstructured) Result { return Result{Progressing, "reconciling"} },
	}, {
		name: "no metadata.generation",
		edit: func(o *unstructured.Unstructured) { unstructured.RemoveNestedField(o.Object, "metadata", "generation") },
		want: func(*unstructured.Unstructured) Result {
			return Result{Progressing, "Waiting for flagplane to observe generation nil"}
		},
	}, {
		name: "status.observedGeneration behind, as a float (Flux's own check skips it, the expression does not)",
		edit: func(o *unstructured.Unstructured) {
			o.Object["status"].(map[string]any)["observedGeneration"] = float64(0)
		},
		want: func(*unstructured.Unstructured) Result {
			return Result{Progressing, "Waiting for flagplane to observe generation 1"}
		},
	}}
	for _, c := range cases {
		if !strings.HasSuffix(c.name, "/testdata/healthy.yaml") {
			continue
		}
		if c.asClient.GetGeneration() != 1 {
			t.Fatalf("%s: the variants expect generation 1", c.name)
		}
		for _, v := range variants {
			t.Run(c.gk.Kind+"/"+v.name, func(t *testing.T) {
				o := c.asClient.DeepCopy()
				v.edit(o)
				want := v.want(o)
				got, err := Argo(o)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("Argo: got %+v, want %+v", got, want)
				}
				flux, err := Flux(o)
				if err != nil {
					t.Fatal(err)
				}
				if flux != fluxFor[want.Status] {
					t.Errorf("Flux: got %s, want %s", flux, fluxFor[want.Status])
				}
			})
		}
		t.Run(c.gk.Kind+"/being deleted", func(t *testing.T) {
			o := c.asClient.DeepCopy()
			now := metav1.Now()
			o.SetDeletionTimestamp(&now)
			if got, err := Argo(o); err != nil || got != (Result{Progressing, "Pending deletion"}) {
				t.Errorf("got %+v, %v", got, err)
			}
		})
	}
}

// TestArgoSuspended: Reconciling True for a person (reason AwaitingApproval
// or Paused) is Suspended for a rollout policy only; any other reason, or
// any other kind, is Progressing. Flux finds them all InProgress.
func TestArgoSuspended(t *testing.T) {
	rollout := schema.GroupKind{Group: "delivery.flagplane.dev", Kind: "FeatureFlagRolloutPolicy"}
	seen := false
	for _, c := range readHealthCases(t) {
		if !strings.HasSuffix(c.name, "/testdata/healthy.yaml") {
			continue
		}
		seen = seen || c.gk == rollout
		for _, reason := range []string{"AwaitingApproval", "Paused", "StepProgressing"} {
			t.Run(c.gk.Kind+"/"+reason, func(t *testing.T) {
				o := c.asClient.DeepCopy()
				conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
				for _, cond := range conds {
					m := cond.(map[string]any)
					switch m["type"] {
					case "Ready":
						m["status"], m["reason"] = "False", reason
					case "Reconciling":
						m["status"], m["reason"], m["message"] = "True", reason, "waiting for "+reason
					}
				}
				if err := unstructured.SetNestedSlice(o.Object, conds, "status", "conditions"); err != nil {
					t.Fatal(err)
				}
				want := Result{Progressing, "waiting for " + reason}
				if c.gk == rollout && reason != "StepProgressing" {
					want.Status = Suspended
				}
				if got, err := Argo(o); err != nil || got != want {
					t.Errorf("Argo: got %+v, %v; want %+v", got, err, want)
				}
				if got, err := Flux(o); err != nil || got != InProgress {
					t.Errorf("Flux: got %s, %v; want InProgress", got, err)
				}
			})
		}
	}
	if !seen {
		t.Errorf("%s has no testdata/healthy.yaml", rollout)
	}
}

// TestArgoRunner checks the runner's reading of what a script returns and
// of its errors against Argo CD's.
func TestArgoRunner(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{"name": "x", "generation": int64(2)}, "spec": map[string]any{"list": []any{"a", float64(1)}}}
	for _, c := range []struct {
		script  string
		want    Result
		wantErr bool
	}{
		{`return {status = "Healthy", message = obj.metadata.name .. " " .. obj.metadata.generation .. " " .. obj.spec.list[1]}`, Result{Healthy, "x 2 a"}, false},
		{`return nil`, Result{}, false},
		{`local x = 1`, Result{}, false},
		{`return {}`, Result{}, false},
		{`return {status = 3}`, Result{}, false},
		{`return {message = "no status"}`, Result{Unknown, invalidHealthStatus}, false},
		{`return {status = "Fine"}`, Result{Unknown, invalidHealthStatus}, false},
		{`return "Healthy"`, Result{Unknown, "expect table output from Lua script, not string"}, true},
		{`return obj.status.conditions`, Result{Status: Unknown}, true},
		{`while true do end`, Result{Status: Unknown}, true},
		{`return {status = string.format("%s", "Healthy")}`, Result{Status: Unknown}, true},
	} {
		got, err := runArgoHealth(c.script, obj, false)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: error %v, want error %v", c.script, err, c.wantErr)
			continue
		}
		if c.wantErr {
			if got.Status != Unknown || got.Message != err.Error() || (c.want.Message != "" && got.Message != c.want.Message) {
				t.Errorf("%s: got %+v for error %v", c.script, got, err)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.script, got, c.want)
		}
	}
	// With the standard libraries open, as Argo CD runs built-in scripts.
	if got, err := runArgoHealth(`return {status = string.format("%s", "Healthy")}`, obj, true); err != nil || got.Status != Healthy {
		t.Errorf("with open libraries: got %+v, %v", got, err)
	}
}

// TestArgoCMSnippets fails when the argocd-cm snippets (config/ and the
// chart's copy) hold other scripts than the health.lua files; -update
// writes them.
func TestArgoCMSnippets(t *testing.T) {
	scripts, err := argoHealthScripts()
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderArgoCMSnippet(scripts)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		ArgoCMSnippet:      want,
		ChartArgoCMSnippet: append([]byte(chartCopyHeader(ArgoCMSnippet)), want...),
	}
	wantData := map[string]string{}
	for gk, s := range scripts {
		wantData[ArgoHealthKey(gk)] = s
	}
	for rel, content := range files {
		path, err := fromRoot(rel)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(got, &cm); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if !reflect.DeepEqual(cm.Data, wantData) {
			for k, v := range wantData {
				if cm.Data[k] != v {
					t.Errorf("%s: %s is not the script of its health.lua", rel, k)
				}
			}
			for k := range cm.Data {
				if _, ok := wantData[k]; !ok {
					t.Errorf("%s: %s has no health.lua", rel, k)
				}
			}
			t.Errorf("%s differs from the health.lua files: run go test ./test/gitopshealth -update", rel)
		} else if !bytes.Equal(got, content) {
			t.Logf("%s holds the scripts, formatted otherwise than -update writes it", rel)
		}
	}
}
