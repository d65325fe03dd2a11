package job

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/spec"
)

const problemSpec = `buffers:
  x: {dtype: f32, count: 4}
  h: {dtype: f32, count: 4, placement: pinned}
ops:
  - {launch: iota, args: {x: x, start: 1}, name: make}
  - {all_reduce: {view: x, op: sum}, name: sum}
  - copy: {from: x, to: h}
outputs: [h]
`

func problemSpecs(t *testing.T, world int) []*Program {
	var ps []*Program
	for r := range world {
		s, err := spec.Parse("w.yaml", []byte(problemSpec), spec.WithRank(r, world))
		require.NoError(t, err)
		ps = append(ps, &Program{Rank: r, Spec: s})
	}
	return ps
}

// An op's failure is placed at the op, a refused run at its largest
// buffer, anything else as it is.
func TestProblem(t *testing.T) {
	s := problemSpecs(t, 2)[0].Spec
	p := Problem(s, fmt.Errorf("executor: %w", &dag.OpError{Op: "make", Err: errors.New("boom")}))
	assert.Equal(t, spec.Problem{File: "w.yaml", Line: 5, Column: 5, Op: "make", Message: "failed: boom"}, p)
	var h *dag.Buffer
	for _, b := range s.Graph.Buffers {
		if b.Name == "h" {
			h = b
		}
	}
	me := &executor.MemoryError{Device: 0, Need: 32, Free: 16, Total: 16, Buffers: []*dag.Buffer{h}}
	p = Problem(s, me)
	assert.Equal(t, 8, p.Line, "at the output entry of h")
	assert.Equal(t, me.Error(), p.Message)
	assert.Equal(t, spec.Problem{Message: "no device"}, Problem(s, errors.New("no device")))
}

// A rank's failure is placed in its spec and names it; ranks that
// disagree on their collectives place the first that differs.
func TestWorldProblem(t *testing.T) {
	ps := problemSpecs(t, 2)
	s, p := WorldProblem(ps, &executor.RankError{Rank: 1, Err: &dag.OpError{Op: "sum", Err: errors.New("lost")}})
	assert.Same(t, ps[1].Spec, s)
	assert.Equal(t, "rank 1: failed: lost", p.Message)
	assert.Equal(t, "sum", p.Op)

	mismatch := &comm.Error{Op: "rendezvous", Peer: 1, Msg: "the collective sequences differ at #1: ...", Err: comm.ErrMismatch}
	_, p = WorldProblem(ps[:1], fmt.Errorf("executor: %w", mismatch))
	assert.Equal(t, "sum", p.Op)
	assert.Equal(t, 6, p.Line)
	_, p = WorldProblem(ps, mismatch)
	assert.Empty(t, p.Op, "with every rank here, no one spec is this process's")
}

// What a graph cannot hold is placed at each op; a plan the verifier
// refused at the first op it names.
func TestCaptureAndVerifyProblems(t *testing.T) {
	s, err := spec.Parse("c.yaml", []byte(`buffers:
  d: {dtype: f32, count: 4}
  h: {dtype: f32, count: 4, placement: pageable}
ops:
  - {launch: iota, args: {x: d, start: 1}, name: make}
  - copy: {from: d, to: h}
    name: fetch
`))
	require.NoError(t, err)
	p, err := Plan(s, Layout{}.PlanOptions(s)...)
	require.NoError(t, err)
	ps := CaptureProblems(s, executor.CheckCapture(p))
	require.Len(t, ps, 1)
	assert.Equal(t, "fetch", ps[0].Op)
	assert.Equal(t, 6, ps[0].Line)
	assert.Contains(t, ps[0].Message, "cannot be captured in a graph: copies between pageable host buffer h")
	assert.Contains(t, ps[0].Hint, "pinned")
	assert.Nil(t, CaptureProblems(s, nil))

	var steps []planner.Step
	for _, st := range p.Steps {
		if st.Kind != planner.Wait {
			steps = append(steps, st)
		}
	}
	p.Steps = steps
	verr := verify.Verify(p)
	require.Error(t, verr)
	vp := Problem(s, verr)
	assert.Contains(t, vp.Message, "the plan failed verification: ")
	assert.Contains(t, []string{"make", "fetch"}, vp.Op)
	assert.Positive(t, vp.Line)
}
