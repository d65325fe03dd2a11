// Package layouttest checks a package's shape from its source, for the
// package's own tests: how many methods each type has, which types hold
// the package's whole (its Session, say) instead of the parts they use,
// how long each Go and C file is, and whether the package doc cites files.
package layouttest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Shape is what Measure finds in a package's folder.
type Shape struct {
	// Methods counts the methods of each type declared in the package's
	// non-test files.
	Methods map[string]int
	// Holders names the struct types of non-test files with a field that
	// holds whole (a whole, a pointer to one, or a slice, array or map of
	// them), as "Type.field"; whole itself is left out. A function type
	// whose parameters name whole holds nothing.
	Holders []string
	// Lines counts the lines of every .go, .c and .h file, tests included.
	Lines map[string]int
	// DocFiles lists the file names that the package doc cites: a package
	// doc says what the package is, and the detail goes on the types.
	DocFiles []string
}

// Limits are the most a package may have; Check fails a test past them.
type Limits struct {
	Methods int    // per type
	Lines   int    // per file
	Whole   string // the type that no part may hold; "" for none
	// Owners are the types that may hold the whole because they own it,
	// as a backend holds its open sessions.
	Owners []string
}

// Measure parses the package in dir and measures its shape, with whole the
// name of the type no part should hold ("" to look for none).
func Measure(dir, whole string) (Shape, error) {
	sh := Shape{Methods: map[string]int{}, Lines: map[string]int{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return sh, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || (ext != ".go" && ext != ".c" && ext != ".h") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return sh, err
		}
		sh.Lines[name] = strings.Count(string(src), "\n")
		if ext != ".go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return sh, err
		}
		if f.Doc != nil {
			sh.DocFiles = append(sh.DocFiles, fileNameRE.FindAllString(f.Doc.Text(), -1)...)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 {
					sh.Methods[receiverType(d.Recv.List[0].Type)]++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || whole == "" || ts.Name.Name == whole {
						continue
					}
					sh.Holders = append(sh.Holders, holders(ts.Name.Name, ts.Type, whole)...)
				}
			}
		}
	}
	sort.Strings(sh.Holders)
	return sh, nil
}

var fileNameRE = regexp.MustCompile(`\b[\w-]+\.(go|c|h|s)\b`)

// receiverType is the name of the type a method's receiver is.
func receiverType(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.ParenExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// holders lists the fields of struct type typ (and of structs nested in
// it) whose type holds whole.
func holders(typ string, x ast.Expr, whole string) []string {
	st, ok := x.(*ast.StructType)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range st.Fields.List {
		if !holds(f.Type, whole) {
			out = append(out, holders(typ, f.Type, whole)...)
			continue
		}
		if len(f.Names) == 0 {
			out = append(out, typ+"."+whole)
		}
		for _, n := range f.Names {
			out = append(out, typ+"."+n.Name)
		}
	}
	return out
}

// holds reports whether a value of type x holds a whole.
func holds(x ast.Expr, whole string) bool {
	switch t := x.(type) {
	case *ast.Ident:
		return t.Name == whole
	case *ast.StarExpr:
		return holds(t.X, whole)
	case *ast.ArrayType:
		return holds(t.Elt, whole)
	case *ast.MapType:
		return holds(t.Key, whole) || holds(t.Value, whole)
	case *ast.ChanType:
		return holds(t.Value, whole)
	}
	return false
}

// Check fails t for each type of the package in dir with more methods
// than lim allows, each part that holds lim.Whole, each file longer than
// lim allows, and each file name the package doc cites. It logs the largest counts, which a package's
// maintainers quote.
func Check(t testing.TB, dir string, lim Limits) {
	t.Helper()
	sh, err := Measure(dir, lim.Whole)
	if err != nil {
		t.Fatalf("measuring %s: %v", dir, err)
	}
	for _, typ := range sortedKeys(sh.Methods) {
		if n := sh.Methods[typ]; n > lim.Methods {
			t.Errorf("%s: type %s has %d methods, more than %d: split it into parts by job", dir, typ, n, lim.Methods)
		}
	}
	parts := 0
	for _, h := range sh.Holders {
		if slices.Contains(lim.Owners, strings.SplitN(h, ".", 2)[0]) {
			continue
		}
		parts++
		t.Errorf("%s: %s holds the %s: give the part the parts it uses instead", dir, h, lim.Whole)
	}
	for _, name := range sh.DocFiles {
		t.Errorf("%s: the package doc cites %s: say it on the types there instead", dir, name)
	}
	for _, name := range sortedKeys(sh.Lines) {
		if n := sh.Lines[name]; n > lim.Lines {
			t.Errorf("%s: %s has %d lines, more than %d: split it by job", dir, name, n, lim.Lines)
		}
	}
	most := func(m map[string]int) (string, int) {
		keys := sortedKeys(m)
		slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
		if len(keys) == 0 {
			return "", 0
		}
		return keys[0], m[keys[0]]
	}
	typ, n := most(sh.Methods)
	file, lines := most(sh.Lines)
	t.Logf("%s: most methods: %s (%d); longest file: %s (%d lines); parts holding the %s: %d", dir, typ, n, file, lines, lim.Whole, parts)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
