// Package docs_test checks that the guides in docs/ name only files and Go
// names that exist in the tree.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// names is what the tree declares: package names, each package's
// top-level names, each type's methods and fields, and the words of
// string literals and of C files, which guides quote too.
type names struct {
	packages map[string]map[string]bool // package name -> top-level names
	members  map[string]map[string]bool // type name -> methods and fields
	anywhere map[string]bool            // every declared name, method and field
	words    map[string]bool            // string literals' and C files' words
	files    map[string]bool            // base names of every file
}

var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// declared walks the Go and C files under root.
func declared(t *testing.T, root string) *names {
	n := &names{packages: map[string]map[string]bool{}, members: map[string]map[string]bool{},
		anywhere: map[string]bool{}, words: map[string]bool{}, files: map[string]bool{}}
	member := func(typ, name string) {
		if n.members[typ] == nil {
			n.members[typ] = map[string]bool{}
		}
		n.members[typ][name] = true
		n.anywhere[name] = true
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		n.files[d.Name()] = true
		switch filepath.Ext(path) {
		case ".c", ".h":
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, w := range wordRE.FindAllString(string(src), -1) {
				n.words[w] = true
			}
			return nil
		case ".go":
		default:
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // testdata may hold Go that does not parse
		}
		pkg := f.Name.Name
		if n.packages[pkg] == nil {
			n.packages[pkg] = map[string]bool{}
		}
		top := func(name string) {
			n.packages[pkg][name] = true
			n.anywhere[name] = true
		}
		ast.Inspect(f, func(x ast.Node) bool {
			if lit, ok := x.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					for _, w := range wordRE.FindAllString(s, -1) {
						n.words[w] = true
					}
				}
			}
			return true
		})
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top(d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				for {
					switch x := typ.(type) {
					case *ast.StarExpr:
						typ = x.X
						continue
					case *ast.IndexExpr:
						typ = x.X
						continue
					case *ast.IndexListExpr:
						typ = x.X
						continue
					case *ast.Ident:
						member(x.Name, d.Name.Name)
					}
					break
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						top(s.Name.Name)
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, fn := range fl.Names {
									member(s.Name.Name, fn.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, vn := range s.Names {
							top(vn.Name)
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return n
}

// inStd reports whether the standard library's package pkg declares
// name (or, with name "", whether it is a package), so that guides may
// point at it.
func inStd(pkg, name string) bool {
	dir := filepath.Join(runtime.GOROOT(), "src", filepath.FromSlash(pkg))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return false
	}
	if name == "" {
		return true
	}
	decl := regexp.MustCompile(`(?m)^(func|type|var|const)?\s*` + regexp.QuoteMeta(name) + `\b`)
	for _, f := range files {
		if src, err := os.ReadFile(f); err == nil && decl.Match(src) {
			return true
		}
	}
	return false
}

// stdRef reports whether ref is a standard library package path, or a
// name in one (path.Name).
func stdRef(ref string) bool {
	pkg, name := ref, ""
	if i := strings.LastIndex(ref, "/"); strings.Contains(ref[i+1:], ".") {
		j := i + 1 + strings.Index(ref[i+1:], ".")
		pkg, name = ref[:j], ref[j+1:]
	}
	return inStd(pkg, name)
}

// known reports whether the dotted Go name ref (pkg.Name, Type.Member,
// pkg.Type.Member, or a name alone) is declared in the tree.
func (n *names) known(ref string) bool {
	parts := strings.Split(ref, ".")
	if len(parts) == 1 {
		return n.anywhere[ref] || n.packages[ref] != nil || n.words[ref]
	}
	first, rest := parts[0], parts[1:]
	if top := n.packages[first]; top != nil {
		if !top[rest[0]] {
			return false
		}
		first, rest = rest[0], rest[1:]
	}
	for _, m := range rest {
		if n.members[first] != nil {
			if !n.members[first][m] {
				return false
			}
		} else if !n.anywhere[m] {
			return false // first is a variable: its member exists somewhere at least
		}
		first = m
	}
	return true
}

var (
	codeRE  = regexp.MustCompile("`([^`\n]+)`")
	pathRE  = regexp.MustCompile(`^[\w.-]+(/[\w.-]+)+/?$`)
	fileRE  = regexp.MustCompile(`^[\w.-]+\.(go|c|h|json|txtar|md|sh|yaml)$`)
	identRE = regexp.MustCompile(`^[A-Za-z]\w*(\.[A-Za-z_]\w*)*(\(\))?$`)
)

// TestGuidesNameWhatExists checks every backticked path, file name and Go
// name in the guides: a path must exist from the repository's root, a
// bare file name somewhere in the tree, and a name must be declared
// (package.Name, Type.Member) or quoted in the code.
func TestGuidesNameWhatExists(t *testing.T) {
	root := ".."
	n := declared(t, root)
	guides, err := filepath.Glob("*.md")
	require.NoError(t, err)
	require.NotEmpty(t, guides)
	for _, guide := range guides {
		src, err := os.ReadFile(guide)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range codeRE.FindAllStringSubmatch(line, -1) {
				ref := m[1]
				switch {
				case pathRE.MatchString(ref) && !strings.HasPrefix(ref, "./"):
					if _, err := os.Stat(filepath.Join(root, ref)); err != nil && !stdRef(ref) {
						t.Errorf("%s:%d: %s does not exist", guide, i+1, ref)
					}
				case fileRE.MatchString(ref):
					if !n.files[ref] {
						t.Errorf("%s:%d: no file %s in the tree", guide, i+1, ref)
					}
				case identRE.MatchString(ref) && !token.IsKeyword(ref):
					if ref := strings.TrimSuffix(ref, "()"); !n.known(ref) && !stdRef(ref) {
						t.Errorf("%s:%d: %s is not declared in the tree", guide, i+1, ref)
					}
				}
			}
		}
	}
}
