// Package doccheck holds the test that every exported identifier of the
// public packages has a doc comment that go doc shows, and that package
// docs cite no file names; and that the stream task's contract is on its
// types.
package doccheck

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// public are the packages a Go program imports, relative to the module root.
var public = []string{"dag", "spec", "planner", "planner/plan", "planner/perf", "planner/memory", "planner/verify",
	"executor", "executor/device", "executor/device/memdev", "executor/device/devicetest", "executor/progress", "cpu", "cuda", "trace", "profile", "job"}

// fileName matches a Go file named in prose, such as "(task.go)".
var fileName = regexp.MustCompile(`\b[a-z0-9_]+\.go\b`)

func TestExportedHaveDocs(t *testing.T) {
	for _, dir := range public {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join("..", "..", dir), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			for name, f := range pkg.Files {
				// The cuda package's doc maps its files for its maintainers;
				// it moves to a comment beside the code with its files.
				if f.Doc != nil && dir != "cuda" {
					if m := fileName.FindString(f.Doc.Text()); m != "" {
						t.Errorf("%s: package doc cites file %s: go doc readers have no files", name, m)
					}
				}
				for _, d := range f.Decls {
					for _, missing := range undocumented(d) {
						t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), missing)
					}
				}
			}
		}
	}
}

// undocumented lists the exported names d declares without a doc comment
// (a group's comment covers its members).
func undocumented(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || d.Doc != nil {
			return nil
		}
		if d.Recv != nil {
			if !exportedRecv(d.Recv) || conventional[d.Name.Name] {
				return nil // the interfaces they satisfy document them
			}
		}
		out = append(out, d.Name.Name)
	case *ast.GenDecl:
		if d.Doc != nil && d.Lparen.IsValid() {
			return nil
		}
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				if d.Doc != nil || s.Doc != nil || s.Comment != nil {
					continue
				}
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

// conventional are the methods of well-known interfaces (fmt.Stringer,
// error, errors.Is and As, sort.Interface).
var conventional = map[string]bool{"String": true, "Error": true, "Unwrap": true, "Is": true, "As": true, "Len": true, "Less": true, "Swap": true}

func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	t := r.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// TestStreamTaskContract: the stream task's contract is the doc of its
// types, which go doc shows, for the GPU and the CPU backend alike.
func TestStreamTaskContract(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join("..", "..", "dag"), func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	require.NoError(t, err)
	var files []*ast.File
	for _, f := range pkgs["dag"].Files {
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/dagrun/dagrun/dag")
	require.NoError(t, err)
	docs := map[string]string{}
	for _, ty := range p.Types {
		docs[ty.Name] = strings.Join(strings.Fields(ty.Doc), " ") // line breaks aside
	}
	for _, tc := range []struct{ typ, says string }{
		{"TaskFunc", "only enqueues work on TaskStream.Handle"},
		{"TaskFunc", "once per capture, not per replay"},
		{"TaskFunc", "RunsOnCPU"},
		{"TaskFunc", "TaskStream whose Host is set"},
		{"TaskStream", "See TaskFunc for the contract"},
	} {
		assert.Contains(t, docs[tc.typ], tc.says, "go doc dag.%s", tc.typ)
	}
}
