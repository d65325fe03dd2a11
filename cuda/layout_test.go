package cuda

import (
	"testing"

	"github.com/dagrun/dagrun/internal/layouttest"
)

// TestLayout keeps the package's parts small and apart: no type with more
// than 35 methods, no part of a Session that holds the Session instead of
// the parts it uses (the Backend owns its open sessions), no Go or C
// file over 700 lines.
func TestLayout(t *testing.T) {
	layouttest.Check(t, ".", layouttest.Limits{Methods: 35, Lines: 700, Whole: "Session", Owners: []string{"Backend"}})
}
