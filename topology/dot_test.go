package topology

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestDOTGolden compares the DOT of known topologies with testdata/<case>.dot.
// Regenerate with: go test ./topology -run TestDOTGolden -update
func TestDOTGolden(t *testing.T) {
	for name, build := range map[string]func(*testing.T) *Topology{
		"empty": func(*testing.T) *Topology { return New() },
		"shop":  shopWorld,
		"shop-after-deletes": func(t *testing.T) *Topology {
			top := shopWorld(t)
			top.DeleteFlagSet("shop", "flags")
			top.DeleteGrant("team", "shop")
			top.DeleteWorkload(depK("shop", "web"))
			return top
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := build(t).DOT()
			path := filepath.Join("testdata", name+".dot")
			if *update {
				g.Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred(), "run with -update to create it")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}
