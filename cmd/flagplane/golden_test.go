package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// TestGolden: offline commands print exactly what testdata/golden holds,
// the output of each command line as first recorded, so that the way the
// command line is parsed can change without changing what it prints.
func TestGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"explain-deploy-web.txt", []string{"explain", "deploy/web", "-n", "shop", "--from-dir", "../../inspect/explain/testdata"}},
		{"explain-deploy-web.json", []string{"explain", "deployment/web", "-n", "shop", "--from-dir", "../../inspect/explain/testdata", "-o", "json"}},
		{"explain-deploy-web.yaml", []string{"explain", "--from-dir", "../../inspect/explain/testdata", "-o", "yaml", "-n", "shop", "deployments/web"}},
		{"explain-deploy-batch.txt", []string{"explain", "deploy/batch", "-n", "shop", "--from-dir", "../../inspect/explain/testdata"}},
		{"explain-ff-checkout.txt", []string{"explain", "ff/checkout", "-n", "shop", "--from-dir", "../../inspect/explain/testdata"}},
		{"explain-ff-checkout.yaml", []string{"explain", "featureflag/checkout", "-n", "shop", "--from-dir", "../../inspect/explain/testdata", "-o", "yaml"}},
		{"explain-ffs-shared.txt", []string{"explain", "ffs/shared", "-n", "platform", "--from-dir", "../../inspect/explain/testdata"}},
		{"explain-ffs-by-label.json", []string{"explain", "featureflagsource/by-label", "-n", "shop", "--from-dir", "../../inspect/explain/testdata", "-o", "json"}},
		{"explain-samples-shop-web.txt", []string{"explain", "deploy/shop-web", "-n", "shop", "--from-dir", "../../config/samples"}},
		{"diff-change.txt", []string{"diff", "-f", "testdata/diff-change.yaml", "--from-dir", "../../inspect/explain/testdata"}},
		{"diff-change.yaml", []string{"diff", "-f", "testdata/diff-change.yaml", "--from-dir", "../../inspect/explain/testdata", "-o", "yaml"}},
		{"diff-evaluate.txt", []string{"diff", "-f", "testdata/diff-evaluate.yaml", "--from-dir", "../../inspect/explain/testdata", "--contexts", "testdata/contexts.yaml"}},
		{"diff-evaluate.json", []string{"diff", "-f", "testdata/diff-evaluate.yaml", "--from-dir", "../../inspect/explain/testdata", "--contexts", "testdata/contexts.yaml", "-o", "json"}},
		{"diff-evaluate.yaml", []string{"diff", "-f", "testdata/diff-evaluate.yaml", "--from-dir", "../../inspect/explain/testdata", "--contexts", "testdata/contexts.yaml", "-o", "yaml"}},
		{"topology-samples.dot", []string{"topology", "--from-dir", "../../config/samples", "--namespace", "shop"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			g.Expect(run(context.Background(), tt.args, &stdout, &stderr)).To(Succeed(), stderr.String())
			path := filepath.Join("testdata", "golden", tt.golden)
			if *update {
				g.Expect(os.WriteFile(path, stdout.Bytes(), 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stdout.String()).To(Equal(string(want)))
		})
	}
}
