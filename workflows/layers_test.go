package workflows_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layers lists, for every package of the workflows, the packages of the
// workflows it may depend on, directly or not: the root package holds
// only what they share and imports none of them but flagsets and
// injection (and flagdversion, the facts of flagd releases, which injection
// writes by); the status of a source compares with the ConfigMaps and RBAC
// it expects, so status imports configmaps and rbac and never the reverse;
// staging reads what consumers hold through status (status.CopiesOf), the
// one answer the delivery status gives too, and what their flagds answer
// through it as well (status.ConfirmObserved, over confirm). The fleet
// hub's workflow reads only what members' flagplane wrote, so it needs
// none of the single cluster's delivery.
var layers = map[string][]string{
	"workflows":                        {"flagsets", "injection", "flagdversion"},
	"workflows/flagdversion":           {},
	"workflows/flagsets":               {},
	"workflows/injection":              {"flagdversion"},
	"workflows/manifests":              {},
	"workflows/blast":                  {"injection", "flagdversion"},
	"workflows/configmaps":             {"workflows", "flagsets", "injection", "flagdversion"},
	"workflows/rbac":                   {"workflows", "flagsets", "injection", "flagdversion"},
	"workflows/restarts":               {"workflows", "flagsets", "injection", "flagdversion"},
	"workflows/status":                 {"workflows", "flagsets", "injection", "flagdversion", "configmaps", "rbac", "confirm", "outbound"},
	"workflows/flagds":                 {"workflows", "flagsets", "injection", "flagdversion", "rbac"},
	"workflows/history":                {"workflows", "flagsets", "injection", "flagdversion"},
	"workflows/staging":                {"workflows", "flagsets", "injection", "flagdversion", "status", "configmaps", "rbac", "outbound", "confirm"},
	"workflows/outbound":               {},
	"workflows/confirm":                {"flagsets", "outbound"},
	"workflows/fleet":                  {"workflows", "flagsets", "injection", "flagdversion"},
	"workflows/internal/workflowstest": {"workflows", "flagsets", "injection", "flagdversion", "manifests", "configmaps", "rbac"},
}

// TestLayers keeps the imports among the workflows one way (see the
// package doc), and every package of the workflows in the table above.
func TestLayers(t *testing.T) {
	const module = "github.com/flagplane/flagplane/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		allowed, ok := layers[pkg]
		if !ok {
			t.Errorf("package %s is not in the layers of the workflows: add it, with what it may import", pkg)
			continue
		}
		seen++
		for _, dep := range fields[1:] {
			rest, ok := strings.CutPrefix(dep, module+"workflows")
			if !ok {
				continue
			}
			name := strings.TrimPrefix(rest, "/")
			if name == "" {
				name = "workflows"
			}
			if !slices.Contains(allowed, name) {
				t.Errorf("%s depends on %s, which it may not (it may: %v)", pkg, dep, allowed)
			}
		}
	}
	if seen != len(layers) {
		t.Errorf("go list saw %d of the %d packages of the table", seen, len(layers))
	}
}
