package trace_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/trace"
)

// TestComparePlan: two independent 100 us spins planned side by side on two
// streams, and a third op after the first. Run as planned, the pair
// overlapped and nothing is late; run one after the other, the pair's
// overlap is lost and the second spin is late, held by the host (nothing on
// the device held it), while the third op, late only because the first ran
// late, is not listed.
func TestComparePlan(t *testing.T) {
	g := dag.New()
	a := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 100.0, dag.Name("a"))
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 100.0, dag.Name("b"))
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0, dag.Name("c"), dag.After(a))
	graph, err := g.Build()
	require.NoError(t, err)
	noOverheads := perf.WithOverheads(nil, perf.Overheads{})
	p, err := planner.New(graph, planner.Streams(2), planner.Cost(noOverheads))
	require.NoError(t, err)
	require.NotEqual(t, p.OpStream[0], p.OpStream[1])
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	span := func(op, start, end int) executor.Span {
		return executor.Span{Op: op, Stream: int(p.OpStream[op]), Start: us(start), End: us(end)}
	}

	asPlanned := trace.ComparePlan(p, noOverheads, planner.Eager, []executor.Span{span(0, 0, 101), span(1, 0, 101), span(2, 101, 112)})
	assert.Equal(t, 1, asPlanned.Planned)
	assert.Zero(t, asPlanned.Lost)
	require.Len(t, asPlanned.Pairs, 1)
	assert.Positive(t, asPlanned.Pairs[0].Achieved)
	assert.Empty(t, asPlanned.Late)

	serial := trace.ComparePlan(p, noOverheads, planner.Eager, []executor.Span{span(0, 0, 101), span(2, 101, 112), span(1, 150, 251)})
	assert.Equal(t, 1, serial.Lost)
	assert.Equal(t, us(251), serial.MeasuredMakespan)
	require.Len(t, serial.Late, 1, "%+v", serial.Late)
	assert.Equal(t, "b", serial.Late[0].Op)
	assert.Equal(t, "host", serial.Late[0].Cause)
	assert.Equal(t, us(150), serial.Late[0].Delay)

	// c waits for a, which ran 50 us long: c is late by what a handed down,
	// not by a delay of its own.
	longA := trace.ComparePlan(p, noOverheads, planner.Eager, []executor.Span{span(0, 0, 151), span(1, 0, 101), span(2, 151, 162)})
	assert.Empty(t, longA.Late)

	var out bytes.Buffer
	require.NoError(t, serial.Write(&out))
	assert.Contains(t, out.String(), "a | b: planned")
	assert.Contains(t, out.String(), "did NOT overlap")
	assert.Contains(t, out.String(), "b: planned at 0 ns, started at 150 µs (+150 µs), held by the host")
	assert.Regexp(t, `^planned against achieved \(eager\): makespan estimated .+, measured 251 µs; 1 of 1 planned overlaps lost, 1 op late$`, serial.Brief())
}

// TestComparePlanLoops: a loop is compared as a whole, one pass as
// planned against its time per iteration, and the op after it, late
// because the loop ran three passes, is not counted late.
func TestComparePlanLoops(t *testing.T) {
	p := withBodyPlan(loopPlan(t))
	sim := perf.Simulate(p, nil, planner.Eager)
	tests := []struct {
		name  string
		spans []executor.Span
		want  []trace.LoopPass
	}{
		{"three iterations", loopSpans(), []trace.LoopPass{{Loop: "refine", Iterations: 3, Pass: sim.Duration[1], Measured: 39 * us, PerPass: 13 * us}}},
		{"one iteration", loopSpans()[:3], []trace.LoopPass{{Loop: "refine", Iterations: 1, Pass: sim.Duration[1], Measured: 13 * us, PerPass: 13 * us}}},
		{"no body spans", []executor.Span{{Op: 0, End: 10 * us}, {Op: 2, Start: 50 * us, End: 60 * us}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := trace.ComparePlan(p, nil, planner.Eager, tt.spans)
			assert.Equal(t, tt.want, c.Loops)
			if tt.want == nil {
				return
			}
			for _, l := range c.Late {
				assert.NotEqual(t, "after", l.Op, "held by the loop, not late of its own")
			}
			var buf bytes.Buffer
			require.NoError(t, c.Write(&buf))
			assert.Contains(t, buf.String(), "  loop refine: one pass estimated ")
			assert.Contains(t, buf.String(), "measured 13.0 µs per iteration")
		})
	}
}
