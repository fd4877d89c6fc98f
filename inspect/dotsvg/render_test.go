package dotsvg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

var update = flag.Bool("update", false, "rewrite testdata/*.svg from testdata/*.dot")

// TestGolden draws each testdata/<case>.dot as testdata/<case>.svg.
// Regenerate with: go test ./inspect/dotsvg -run TestGolden -update, and
// look at the pictures before committing them.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/*.dot")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no testdata/*.dot: %v", err)
	}
	for _, in := range cases {
		t.Run(filepath.Base(in), func(t *testing.T) {
			g := NewWithT(t)
			dot, err := os.ReadFile(in)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := Render(dot)
			g.Expect(err).NotTo(HaveOccurred())
			wellFormed(t, got)
			path := strings.TrimSuffix(in, ".dot") + ".svg"
			if *update {
				g.Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred(), "run with -update to create it")
			g.Expect(string(got)).To(Equal(string(want)))
		})
	}
}

// wellFormed decodes svg to its end as XML.
func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
}
