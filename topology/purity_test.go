package topology_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure keeps the package free of client-go and controller-runtime, even
// through its imports: the graph is computed the same offline, in tests and
// in the operator.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go") || strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") {
			t.Errorf("topology depends on %s", dep)
		}
	}
}
