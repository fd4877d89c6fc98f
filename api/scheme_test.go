package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestNewSchemeKnowsEveryGroup: the scheme has every group's kinds.
func TestNewSchemeKnowsEveryGroup(t *testing.T) {
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		v1beta1.GroupVersion.WithKind(v1beta1.FeatureFlagKind),
		policyv1alpha1.GroupVersion.WithKind(policyv1alpha1.FeatureFlagSourcePolicyKind),
		deliveryv1alpha1.GroupVersion.WithKind(deliveryv1alpha1.FeatureFlagRevisionKind),
		{Version: "v1", Kind: "Pod"},
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
}

// TestGroupsRegisterHereOnly: no file of the module but this package's
// (and the groups' own) names a group's AddToScheme: a scheme gets
// flagplane's API through AddToScheme or NewScheme, so a group added here
// reaches every client. Unit tests (_test.go) may build the small schemes
// they need.
func TestGroupsRegisterHereOnly(t *testing.T) {
	const module = "github.com/flagplane/flagplane/"
	groups := map[string]bool{
		module + "api/v1beta1":           true,
		module + "api/policy/v1alpha1":   true,
		module + "api/delivery/v1alpha1": true,
	}
	root := ".."
	fset := token.NewFileSet()
	var files int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if dir := filepath.ToSlash(filepath.Dir(rel)); dir == "api" || groups[module+dir] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		names := map[string]bool{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !groups[p] {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "AddToScheme" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] {
				t.Errorf("%s: %s.AddToScheme: register flagplane's API through api.AddToScheme or api.NewScheme", fset.Position(sel.Pos()), id.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files: the walk no longer covers the module", files)
	}
}
