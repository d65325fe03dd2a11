package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/layouttest"
)

// TestLayout keeps the command a thin shell over the library: flags,
// files and printing in at most 2,500 lines of Go, no type with more than
// 35 methods, no file over 700 lines. What a Go program would need too
// belongs in the library's packages (job, executor, spec, trace, profile).
func TestLayout(t *testing.T) {
	layouttest.Check(t, ".", layouttest.Limits{Methods: 35, Lines: 700})
	sh, err := layouttest.Measure(".", "")
	require.NoError(t, err)
	total := 0
	for name, n := range sh.Lines {
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			total += n
		}
	}
	assert.LessOrEqual(t, total, 2500, "the command's Go lines, tests left out")
}
