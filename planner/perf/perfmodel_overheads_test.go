package perf_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// TestPerfModelOverheads: measured overheads replace the fallback's, the
// submission cost is the count-weighted mean over op kinds, and Simulate
// of an eager run charges them.
func TestPerfModelOverheads(t *testing.T) {
	m := perf.NewPerfModel(h100, nil)
	assert.Equal(t, perf.DefaultOverheads(), m.Overheads(), "nothing measured: the fallback's")

	for _, d := range []time.Duration{100, 300} {
		require.NoError(t, m.ObserveOverhead(perf.SubmitOverhead(dag.Launch), d))
	}
	require.NoError(t, m.ObserveOverhead(perf.SubmitOverhead(dag.Copy), 800))
	require.NoError(t, m.ObserveOverhead(perf.OverheadWait, 50))
	require.NoError(t, m.ObserveOverhead(perf.OverheadReplayOp, 90))
	o := m.Overheads()
	assert.Equal(t, time.Duration((100+300+800)/3), o.Submit)
	assert.Equal(t, map[dag.OpKind]time.Duration{dag.Launch: 200, dag.Copy: 800}, o.SubmitKinds, "each kind's own")
	assert.Equal(t, time.Duration(50), o.Wait)
	assert.Equal(t, time.Duration(90), o.ReplayOp)
	assert.Equal(t, perf.DefaultOverheads().Record, o.Record, "not measured: the fallback's")

	// A chain of n spins, eager, on one stream: the host submits each op
	// before it can start, so the makespan grows by the submission cost.
	g := dag.New()
	var prev *dag.Op
	for range 4 {
		op := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 0.0)
		if prev != nil {
			op.With(dag.After(prev))
		}
		prev = op
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(1), planner.Cost(m))
	require.NoError(t, err)
	fast := perf.NewPerfModel(h100, nil)
	require.NoError(t, fast.ObserveOverhead(perf.SubmitOverhead(dag.Launch), 10))
	slow := perf.Simulate(p, m, planner.Eager).Makespan
	quick := perf.Simulate(p, fast, planner.Eager).Makespan
	assert.Greater(t, slow, quick, "a dearer measured submission lengthens the eager estimate")
}

// Each op kind is charged its own measured submission cost in an eager
// estimate: four kernels and a fill, with kernels dear to submit and fills
// cheap, cost the host four kernels' submissions and one fill's.
func TestSimulateSubmitByKind(t *testing.T) {
	g := dag.New()
	buf := g.Buffer("b", 1<<10, dag.Zeros())
	g.Fill(buf.All(), 0)
	for range 4 {
		g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 0.0)
	}
	graph, err := g.Build()
	require.NoError(t, err)
	zero := perf.Overheads{Submit: time.Microsecond}
	p, err := planner.New(graph, planner.Streams(4), planner.Cost(perf.WithOverheads(nil, zero)))
	require.NoError(t, err)
	durations := perf.Measured(nil, nil)
	byKind := zero
	byKind.SubmitKinds = map[dag.OpKind]time.Duration{dag.Launch: 50 * time.Microsecond}
	s := perf.Simulate(p, perf.WithOverheads(durations, byKind), planner.Eager)
	assert.GreaterOrEqual(t, s.Submitted, 4*50*time.Microsecond+time.Microsecond)
	assert.Less(t, s.Submitted, 4*50*time.Microsecond+2*time.Microsecond, "the fill at Submit's 1 us")
	replay := perf.Simulate(p, perf.WithOverheads(durations, byKind), planner.Replay)
	assert.Less(t, replay.Submitted, 50*time.Microsecond, "a replay pays no host submission")
}
