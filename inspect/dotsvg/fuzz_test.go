package dotsvg

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRender: no DOT makes Render panic, and what it draws is well-formed
// XML. Run with: go test ./inspect/dotsvg -fuzz FuzzRender
func FuzzRender(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.dot")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`digraph { a -> b -> c -> a; c -> c [label="me"]; d }`,
		`digraph { "\\N" [label="\N\l\r\\"]; "<&>" -> "'\"" [label="\x01"] }`,
		`digraph { a [shape=ellipse, width=3, height=0.1]; a -> b [arrowhead=none, style="invis"] }`,
		`digraph { a [fontsize=-3, color="red:blue", fillcolor="url(x)", style=filled]; }`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, dot []byte) {
		if len(dot) > 1<<14 {
			return
		}
		svg, err := Render(dot)
		if err != nil {
			return
		}
		wellFormed(t, svg)
	})
}
