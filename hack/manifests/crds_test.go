package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSyncCRDResources: a CRD that controller-gen wrote and the
// kustomization does not list is added to it; one that is gone is dropped;
// the rest of the file, the order of what it lists included, is kept.
func TestSyncCRDResources(t *testing.T) {
	root := t.TempDir()
	g := &generator{root: root}
	const kustomization = `# The CRDs.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- bases/b.example_bs.yaml
- bases/a.example_gone.yaml
- bases/a.example_as.yaml
`
	for _, f := range []string{"config/crd/bases/a.example_as.yaml", "config/crd/bases/b.example_bs.yaml",
		"config/crd/bases/c.example_new.yaml", "config/fleet/crd/f.example_fs.yaml"} {
		if err := g.write(f, []byte("kind: CustomResourceDefinition\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.write("config/crd/kustomization.yaml", []byte(kustomization)); err != nil {
		t.Fatal(err)
	}
	if err := g.write("config/fleet/crd/kustomization.yaml", []byte("resources:\n- f.example_fs.yaml\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.syncCRDResources(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "config/crd/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := `# The CRDs.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- bases/b.example_bs.yaml
- bases/a.example_as.yaml
- bases/c.example_new.yaml
`
	if string(got) != want {
		t.Errorf("config/crd/kustomization.yaml:\n%s\nwant:\n%s", got, want)
	}
	got, err = os.ReadFile(filepath.Join(root, "config/fleet/crd/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "resources:\n- f.example_fs.yaml\n" {
		t.Errorf("config/fleet/crd/kustomization.yaml changed:\n%s", got)
	}

	if _, err := withResources("kind: Kustomization\n", nil); err == nil {
		t.Error("a kustomization without resources: was accepted")
	}
}
