package gitopshealth

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ArgoHealthKey is the argocd-cm key of a group and kind's health script:
// resource.customizations.health.<group>_<Kind>, or .<Kind> for the core
// group.
func ArgoHealthKey(gk schema.GroupKind) string {
	if gk.Group == "" {
		return "resource.customizations.health." + gk.Kind
	}
	return "resource.customizations.health." + gk.Group + "_" + gk.Kind
}

// argoHealthScripts reads every health.lua under ArgoCustomizationsDir, by
// group and kind.
func argoHealthScripts() (map[schema.GroupKind]string, error) {
	dir, err := fromRoot(ArgoCustomizationsDir)
	if err != nil {
		return nil, err
	}
	out := map[schema.GroupKind]string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "health.lua" {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(path))
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		var gk schema.GroupKind
		switch len(parts) {
		case 1:
			gk.Kind = parts[0]
		case 2:
			gk.Group, gk.Kind = parts[0], parts[1]
		default:
			return fmt.Errorf("%s: not at <group>/<Kind>/health.lua", path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[gk] = string(b)
		return nil
	})
	return out, err
}

// argoCMSnippetHeader heads ArgoCMSnippet.
const argoCMSnippetHeader = `# Argo CD health checks for flagplane's kinds, as argocd-cm keys: merge
# this data into the argocd-cm ConfigMap of Argo CD's namespace (or into
# configs.cm of Argo CD's Helm chart). The scripts are the health.lua files
# of config/gitops/argocd/resource_customizations/<group>/<Kind>, which
# "go test ./test/gitopshealth -update" writes here. See docs/gitops.md.
`

// chartCopyHeader heads the chart's copy, as hack/manifests (`make
// manifests`) heads the files it copies, so that -update and it write the
// same file. (The test compares the scripts the snippets hold, not their
// comments.)
func chartCopyHeader(src string) string {
	return fmt.Sprintf("# Copied from %s by `make manifests`: edit it there.\n", src)
}

// renderArgoCMSnippet writes the scripts as an argocd-cm data fragment,
// keys in order, each script a literal block.
func renderArgoCMSnippet(scripts map[schema.GroupKind]string) ([]byte, error) {
	gks := make([]schema.GroupKind, 0, len(scripts))
	for gk := range scripts {
		gks = append(gks, gk)
	}
	slices.SortFunc(gks, func(a, b schema.GroupKind) int {
		return strings.Compare(ArgoHealthKey(a), ArgoHealthKey(b))
	})
	var buf bytes.Buffer
	buf.WriteString(argoCMSnippetHeader)
	buf.WriteString("data:\n")
	for _, gk := range gks {
		script := scripts[gk]
		if !strings.HasSuffix(script, "\n") || strings.HasSuffix(script, "\n\n") {
			return nil, fmt.Errorf("health.lua of %s must end with exactly one newline", gk)
		}
		if strings.HasPrefix(script, " ") || strings.HasPrefix(script, "\n") {
			return nil, fmt.Errorf("health.lua of %s must not begin with a space or an empty line", gk)
		}
		fmt.Fprintf(&buf, "  %s: |\n", ArgoHealthKey(gk))
		for _, line := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
			if line == "" {
				buf.WriteString("\n")
				continue
			}
			buf.WriteString("    " + line + "\n")
		}
	}
	return buf.Bytes(), nil
}
