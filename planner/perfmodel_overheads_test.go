package planner_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// TestPerfModelOverheads: measured overheads replace the fallback's, the
// submission cost is the count-weighted mean over op kinds, and Simulate
// of an eager run charges them.
func TestPerfModelOverheads(t *testing.T) {
	m := planner.NewPerfModel(h100, nil)
	assert.Equal(t, planner.DefaultOverheads(), m.Overheads(), "nothing measured: the fallback's")

	for _, d := range []time.Duration{100, 300} {
		require.NoError(t, m.ObserveOverhead(planner.SubmitOverhead(dag.Launch), d))
	}
	require.NoError(t, m.ObserveOverhead(planner.SubmitOverhead(dag.Copy), 800))
	require.NoError(t, m.ObserveOverhead(planner.OverheadWait, 50))
	require.NoError(t, m.ObserveOverhead(planner.OverheadReplayOp, 90))
	o := m.Overheads()
	assert.Equal(t, time.Duration((100+300+800)/3), o.Submit)
	assert.Equal(t, time.Duration(50), o.Wait)
	assert.Equal(t, time.Duration(90), o.ReplayOp)
	assert.Equal(t, planner.DefaultOverheads().Record, o.Record, "not measured: the fallback's")

	// A chain of n spins, eager, on one stream: the host submits each op
	// before it can start, so the makespan grows by the submission cost.
	g := dag.New()
	var prev *dag.Op
	for range 4 {
		op := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 0.0)
		if prev != nil {
			op.After(prev)
		}
		prev = op
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Options{Streams: 1, Cost: m})
	require.NoError(t, err)
	fast := planner.NewPerfModel(h100, nil)
	require.NoError(t, fast.ObserveOverhead(planner.SubmitOverhead(dag.Launch), 10))
	slow := planner.Simulate(p, m, planner.Eager).Makespan
	quick := planner.Simulate(p, fast, planner.Eager).Makespan
	assert.Greater(t, slow, quick, "a dearer measured submission lengthens the eager estimate")
}
