package controllers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestKindsAreRegisteredInTheTable: every informer handler of the package
// is added by attach (registrar.go), so every kind that feeds the graph or
// a queue is a line of the kinds table; an informer had elsewhere (a
// handler registered beside the table) fails here with its place.
func TestKindsAreRegisteredInTheTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"registrar.go": true}
	fset := token.NewFileSet()
	var found int
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "AddEventHandler" && sel.Sel.Name != "AddEventHandlerWithResyncPeriod" &&
				sel.Sel.Name != "AddEventHandlerWithOptions" && sel.Sel.Name != "GetInformer" && sel.Sel.Name != "GetInformerForKind") {
				return true
			}
			found++
			if !allowed[name] {
				t.Errorf("%s: %s outside the kinds table: add a line to kinds (kinds.go) instead", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if found == 0 {
		t.Fatal("no informer is registered at all: the test no longer looks where the registrations are")
	}
}
