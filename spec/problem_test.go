package spec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProblemText(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.yaml", Line: 3, Column: 5, Op: "x", Message: "failed", Hint: "try y"}, `a.yaml:3:5: op "x" failed (try y)`},
		{Problem{File: "a.yaml", Message: "interrupted"}, "a.yaml: interrupted"},
		{Problem{Message: "no such flag"}, "dagrun run: no such flag"},
		{Problem{File: "a\x1b.yaml", Line: 1, Column: 1, Message: "m"}, `"a\x1b.yaml":1:1: m`},
	} {
		assert.Equal(t, tc.want, tc.p.Text("dagrun run: "))
	}
}

// An op's problem is placed at its declaration; an unknown op's at the
// file; warnings come as problems at their positions.
func TestOpProblem(t *testing.T) {
	s, err := Parse("p.yaml", []byte(`buffers:
  d: {dtype: f32, count: 4}
  h: {dtype: f32, count: 4, placement: pageable}
ops:
  - {launch: iota, args: {x: d, start: 1}, name: zero}
  - copy: {from: d, to: h}
`))
	require.NoError(t, err)
	assert.Equal(t, Problem{File: "p.yaml", Line: 5, Column: 5, Op: "zero", Message: "failed"}, s.OpProblem("zero", "failed"))
	assert.Equal(t, Problem{File: "p.yaml", Op: "nope", Message: "failed"}, s.OpProblem("nope", "failed"))
	require.NotEmpty(t, s.Warnings)
	for i, w := range s.WarningProblems() {
		assert.Equal(t, s.Warnings[i].Pos.Line, w.Line)
		assert.Equal(t, s.Warnings[i].Msg, w.Message)
	}
}
