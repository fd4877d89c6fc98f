package controllers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestControllersMakeNoHTTPRequest: controllers/ wires events into the
// graph and queues; every read of the outside (a pod's flagd metrics, a
// Prometheus query) is the staging workflow's, through its one hardened
// client. A client, a request or a call of net/http's helpers here fails.
func TestControllersMakeNoHTTPRequest(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{"Client": true, "DefaultClient": true, "Transport": true, "DefaultTransport": true,
		"Get": true, "Post": true, "Head": true, "PostForm": true, "NewRequest": true, "NewRequestWithContext": true}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		httpName := ""
		for _, imp := range f.Imports {
			if strings.Trim(imp.Path.Value, `"`) == "net/http" {
				httpName = "http"
				if imp.Name != nil {
					httpName = imp.Name.Name
				}
			}
		}
		if httpName == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == httpName && forbidden[sel.Sel.Name] {
					t.Errorf("%s uses %s.%s: controllers/ makes no HTTP request (workflows/outbound does, for workflows/staging)", name, httpName, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no file checked")
	}
}
