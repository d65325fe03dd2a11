package spec

import (
	"testing"

	"github.com/dagrun/dagrun/internal/layouttest"
)

// TestLayout keeps the loader by job: no type with more than 25 methods,
// the loader's parts (views, paths, decls, the op kinds' opReader) given
// what they use and never the loader, no Go file over 700 lines.
func TestLayout(t *testing.T) {
	layouttest.Check(t, ".", layouttest.Limits{Methods: 25, Lines: 700, Whole: "loader"})
}
