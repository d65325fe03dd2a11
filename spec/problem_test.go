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

// A persistent buffer is placed at its output entry, else at its first
// user; a temporary at its alloc.
func TestBufferPos(t *testing.T) {
	s, err := Parse("b.yaml", []byte(`buffers:
  d: {dtype: f32, count: 4}
  t: {dtype: f32, count: 4, temporary: true}
  h: {dtype: f32, count: 4, placement: pinned}
ops:
  - {launch: iota, args: {x: t, start: 1}, name: make}
  - copy: {from: t, to: d}
    name: keep
  - copy: {from: d, to: h}
outputs: [h]
`))
	require.NoError(t, err)
	pos := func(name string) Position {
		for _, b := range s.Graph.Buffers {
			if b.Name == name {
				p, ok := s.BufferPos(b)
				require.True(t, ok, name)
				return p
			}
		}
		t.Fatalf("no buffer %s", name)
		return Position{}
	}
	keep, _ := s.OpPos("keep")
	assert.Equal(t, keep, pos("d"))
	assert.Equal(t, 10, pos("h").Line)
	assert.Equal(t, 3, pos("t").Line, "a temporary's alloc is placed at the buffer")
}
