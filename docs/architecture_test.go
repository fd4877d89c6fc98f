// Package docs is the documentation. It holds no code: its test keeps
// architecture.md true to the code it describes, and needs no cluster.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pageFile is the page checked, in this directory; messages name it page,
// from the module's root.
const (
	pageFile = "architecture.md"
	page     = "docs/" + pageFile
)

// TestArchitecture fails when architecture.md drifts from the code: a
// package of the module without a row in its layout table, or a row that
// names no directory; a command of the flagplane CLI that the
// cmd/flagplane row does not list, or one it lists that is gone; a kind of
// the controllers' tables that "Adding a new kind" does not name; a Go file
// it names that is gone.
func TestArchitecture(t *testing.T) {
	b, err := os.ReadFile(pageFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("layout", func(t *testing.T) { checkLayout(t, root, doc) })
	t.Run("cli", func(t *testing.T) { checkCLI(t, root, doc) })
	t.Run("kinds", func(t *testing.T) { checkKinds(t, root, doc) })
	t.Run("files", func(t *testing.T) { checkFiles(t, root, doc) })
}

// The layout table.
const layoutHeading = "## Layout"

// checkLayout: every package of the module (go list ./...: the module's
// own, hack/ and test/ included; not the modules of their own under hack/)
// has a row in the layout table, and every path of the table is a
// directory of the module.
//
// The first column of a row names one or more paths from the module's
// root, each a code span:
//   - `p` or `p/` lists the package in directory p, and only it: a package
//     below p needs a row of its own (`workflows/` does not list
//     workflows/flagsets);
//   - `p/...` lists p and every package below it (`test/...`).
//
// A row may name a directory without a package (config/, charts/flagplane,
// a module of its own under hack/).
func checkLayout(t *testing.T, root, doc string) {
	rows := table(t, doc, layoutHeading)
	var paths []string
	for _, row := range rows {
		paths = append(paths, codeSpans(row[0])...)
	}
	if len(paths) == 0 {
		t.Fatalf("%s: the %s table names no path in its first column", page, layoutHeading)
	}
	for _, p := range paths {
		dir := strings.TrimSuffix(strings.TrimSuffix(p, "/..."), "/")
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir))); err != nil || !fi.IsDir() {
			t.Errorf("%s: the %s table names `%s`, which is not a directory of the module", page, layoutHeading, p)
		}
	}
	for _, pkg := range packages(t, root) {
		if !slices.ContainsFunc(paths, func(p string) bool { return lists(p, pkg) }) {
			t.Errorf("%s: package %s has no row in the %s table (a row `p` lists the package p only, `p/...` p and every package below it)",
				page, pkg, layoutHeading)
		}
	}
}

// lists says whether the layout table's path p lists the package in
// directory pkg.
func lists(p, pkg string) bool {
	if base, ok := strings.CutSuffix(p, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == strings.TrimSuffix(p, "/")
}

// packages are the directories of the module's packages, from its root.
func packages(t *testing.T, root string) []string {
	cmd := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... lists no package")
	}
	return pkgs
}

// The CLI: its commands are listed in the layout table's row of cliDir, as
// code spans `flagplane NAME ...`.
const (
	cliDir  = "cmd/flagplane"
	cliRoot = "newRootCmd"
)

// checkCLI: the cmd/flagplane row of the layout table lists every command
// of the CLI, and no other.
func checkCLI(t *testing.T, root, doc string) {
	var listed []string
	for _, row := range table(t, doc, layoutHeading) {
		if len(row) < 2 || !slices.Contains(codeSpans(row[0]), cliDir) {
			continue
		}
		for _, s := range codeSpans(row[1]) {
			if name, ok := strings.CutPrefix(s, "flagplane "); ok && len(strings.Fields(name)) > 0 {
				listed = append(listed, strings.Fields(name)[0])
			}
		}
	}
	if len(listed) == 0 {
		t.Fatalf("%s: no row of the %s table names `%s` and lists commands as `flagplane NAME`", page, layoutHeading, cliDir)
	}
	commands := cliCommands(t, root, cliDir)
	for _, c := range commands {
		if !slices.Contains(listed, c) {
			t.Errorf("%s: the `%s` row of the %s table does not list `flagplane %s`", page, cliDir, layoutHeading, c)
		}
	}
	for _, c := range listed {
		if !slices.Contains(commands, c) {
			t.Errorf("%s: the `%s` row of the %s table lists `flagplane %s`, which the CLI does not have (it has %s)",
				page, cliDir, layoutHeading, c, strings.Join(commands, ", "))
		}
	}
}

// cliCommands are the names of the commands the CLI's root has, read from
// its source: cmd/flagplane is a main package, which this one cannot
// import. They are those cliRoot adds with AddCommand, each argument a call
// of a function of the package whose first cobra.Command literal has a Use
// that starts with the name; and cobra's completion, which cobra adds to a
// root with commands unless the package sets
// CompletionOptions.DisableDefaultCmd. cobra's help is left out.
func cliCommands(t *testing.T, root, dir string) []string {
	decls, files := parseDir(t, root, dir)
	funcs := plainFuncs(decls)
	rootFn, ok := funcs[cliRoot]
	if !ok {
		t.Fatalf("%s has no function %s: tell the test where the root command is built", dir, cliRoot)
	}
	var commands []string
	ast.Inspect(rootFn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "AddCommand" {
			return true
		}
		for _, arg := range call.Args {
			name := ""
			if c, ok := arg.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok {
					name = id.Name
				}
			}
			fn, ok := funcs[name]
			if !ok {
				t.Errorf("%s: %s adds a command that is not a call of a function of the package: teach cliCommands", dir, cliRoot)
				continue
			}
			use, ok := cobraUse(fn)
			if !ok {
				t.Errorf("%s: %s builds no cobra.Command with a Use string: teach cliCommands", dir, name)
				continue
			}
			commands = append(commands, use)
		}
		return true
	})
	if len(commands) == 0 {
		t.Fatalf("%s: %s adds no command: teach cliCommands", dir, cliRoot)
	}
	disabled := false
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == "DisableDefaultCmd" {
				disabled = true
			}
			return !disabled
		})
	}
	if !disabled {
		commands = append(commands, "completion")
	}
	slices.Sort(commands)
	return commands
}

// cobraUse is the first word of the Use of fn's first cobra.Command
// literal.
func cobraUse(fn *ast.FuncDecl) (string, bool) {
	use := ""
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || use != "" || !isSelector(lit.Type, "cobra", "Command") {
			return use == ""
		}
		if s, ok := stringField(lit, "Use"); ok && len(strings.Fields(s)) > 0 {
			use = strings.Fields(s)[0]
		}
		return false
	})
	return use, use != ""
}

// The kinds: the lines of the tables of kindsDir, each a kindLine value.
// When the tables change shape, these names and kinds are what to adapt.
const (
	kindsDir     = "controllers"
	kindsResult  = "registrar"   // a table returns []registrar
	kindLine     = "graphKind"   // a line of a kind of the graph
	watchedLine  = "watchedKind" // a line of a kind that only feeds a queue or a lookup
	kindsHeading = "## Adding a new kind"
)

// checkKinds: "Adding a new kind" names every kind of the tables, each as
// a code span of the kind's name alone (`FeatureFlag`).
func checkKinds(t *testing.T, root, doc string) {
	text, ok := section(doc, kindsHeading)
	if !ok {
		t.Fatalf("%s has no section %q", page, kindsHeading)
	}
	spans := codeSpans(text)
	for _, k := range kinds(t, root, kindsDir) {
		if !slices.Contains(spans, k) {
			t.Errorf("%s: the section %q does not name the kind `%s` (a line of the tables of %s/)", page, kindsHeading, k, kindsDir)
		}
	}
}

// kinds are the kinds of the lines of the tables of the controllers:
// the functions of the package that return []registrar (graphKinds,
// rolloutKinds), however many there are. In their bodies, a line is
//   - a graphKind[*pkg.T]{...} or watchedKind[*pkg.T]{...} literal: its
//     name field when that is a string, else the kind T; for an informer of
//     unstructured objects, its name field (a string, or V.Kind of a
//     package-level composite literal V with a string Kind field);
//   - a call of a function of the package that returns a graphKind (such
//     as workloadKind): the kind T of its &pkg.T{} argument.
func kinds(t *testing.T, root, dir string) []string {
	decls, files := parseDir(t, root, dir)
	var tables []*ast.FuncDecl
	helpers := map[string]bool{}
	for _, fn := range decls {
		res := fn.Type.Results
		if res == nil || len(res.List) != 1 {
			continue
		}
		switch typ := res.List[0].Type.(type) {
		case *ast.ArrayType:
			if id, ok := typ.Elt.(*ast.Ident); ok && id.Name == kindsResult {
				tables = append(tables, fn)
			}
		case *ast.IndexExpr:
			if id, ok := typ.X.(*ast.Ident); ok && id.Name == kindLine && fn.Recv == nil {
				helpers[fn.Name.Name] = true
			}
		}
	}
	if len(tables) == 0 {
		t.Fatalf("%s: no function returns []%s: tell the test where the kinds' table is", dir, kindsResult)
	}
	var out []string
	for _, fn := range tables {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				idx, ok := n.Type.(*ast.IndexExpr)
				if !ok {
					return true
				}
				if id, ok := idx.X.(*ast.Ident); !ok || (id.Name != kindLine && id.Name != watchedLine) {
					return true
				}
				k := typeName(idx.Index)
				if name, ok := stringField(n, "name"); ok {
					k = name
				} else if k == "Unstructured" {
					k = unstructuredKind(n, files)
				}
				if k == "" {
					t.Errorf("%s: %s: cannot tell the kind of this line: teach kinds", dir, fn.Name.Name)
				} else {
					out = append(out, k)
				}
				return false
			case *ast.CallExpr:
				id, ok := n.Fun.(*ast.Ident)
				if !ok || !helpers[id.Name] {
					return true
				}
				k := ""
				for _, arg := range n.Args {
					if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.AND {
						if lit, ok := u.X.(*ast.CompositeLit); ok {
							k = typeName(lit.Type)
							break
						}
					}
				}
				if k == "" {
					t.Errorf("%s: %s: cannot tell the kind of this %s call: teach kinds", dir, fn.Name.Name, id.Name)
				} else {
					out = append(out, k)
				}
				return false
			}
			return true
		})
	}
	if len(out) == 0 {
		t.Fatalf("%s: the tables hold no %s line the test can read: teach kinds", dir, kindLine)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// typeName is the name of the type T of an expression T, *T, pkg.T or
// *pkg.T.
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// unstructuredKind is the name field of a kind line read as unstructured
// objects: a string, or V.Kind of a package-level composite literal V.
func unstructuredKind(lit *ast.CompositeLit, files []*ast.File) string {
	if s, ok := stringField(lit, "name"); ok {
		return s
	}
	v, ok := field(lit, "name").(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	x, ok := v.X.(*ast.Ident)
	if !ok {
		return ""
	}
	for _, f := range files {
		for _, d := range f.Decls {
			gen, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gen.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, name := range vs.Names {
					if name.Name != x.Name || i >= len(vs.Values) {
						continue
					}
					if def, ok := vs.Values[i].(*ast.CompositeLit); ok {
						if s, ok := stringField(def, v.Sel.Name); ok {
							return s
						}
					}
				}
			}
		}
	}
	return ""
}

// checkFiles: every code span of the page that names a Go file by its path
// from the module's root (it holds a slash and ends in .go) names a file
// that exists.
func checkFiles(t *testing.T, root, doc string) {
	seen := map[string]bool{}
	for _, s := range codeSpans(doc) {
		if seen[s] || !strings.Contains(s, "/") || !strings.HasSuffix(s, ".go") {
			continue
		}
		seen[s] = true
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(s))); err != nil {
			t.Errorf("%s names `%s`, which is not a file of the module", page, s)
		}
	}
}

// section is the text under heading (a line that starts with it) up to the
// next heading of its level or above.
func section(doc, heading string) (string, bool) {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, heading) {
			continue
		}
		var out []string
		for _, l := range lines[i+1:] {
			if strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "## ") {
				break
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n"), true
	}
	return "", false
}

// table is the cells of the rows of the first table under heading, without
// its header and delimiter rows.
func table(t *testing.T, doc, heading string) [][]string {
	text, ok := section(doc, heading)
	if !ok {
		t.Fatalf("%s has no section %q", page, heading)
	}
	var rows [][]string
	started := false
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		rows = append(rows, cells(l))
	}
	if len(rows) < 2 {
		t.Fatalf("%s: the section %q has no table", page, heading)
	}
	return rows[2:]
}

// cells splits a table row on the pipes that are not escaped.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) {
		row = row[:len(row)-1]
	}
	var out []string
	var cell strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cell.WriteByte('|')
			i++
		case row[i] == '|':
			out = append(out, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(row[i])
		}
	}
	return append(out, strings.TrimSpace(cell.String()))
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans are the contents of the code spans of s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// parseDir parses the Go files of dir (from root), without its tests, and
// returns its functions and methods, and its files.
func parseDir(t *testing.T, root, dir string) ([]*ast.FuncDecl, []*ast.File) {
	names, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var decls []*ast.FuncDecl
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				decls = append(decls, fn)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no Go file", dir)
	}
	return decls, files
}

// plainFuncs are the functions of decls that are not methods, by name.
func plainFuncs(decls []*ast.FuncDecl) map[string]*ast.FuncDecl {
	funcs := map[string]*ast.FuncDecl{}
	for _, fn := range decls {
		if fn.Recv == nil {
			funcs[fn.Name.Name] = fn
		}
	}
	return funcs
}

// field is the value of a keyed field of a composite literal.
func field(lit *ast.CompositeLit, key string) ast.Expr {
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == key {
				return kv.Value
			}
		}
	}
	return nil
}

// stringField is the value of a keyed field of a composite literal that
// is a string literal.
func stringField(lit *ast.CompositeLit, key string) (string, bool) {
	b, ok := field(lit, key).(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

// isSelector says whether e is pkg.name.
func isSelector(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == pkg && s.Sel.Name == name
}
