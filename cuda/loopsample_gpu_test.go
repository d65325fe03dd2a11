//go:build cgo

package cuda

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

// sampledLoop is a loop of trips iterations at most max: each doubles x,
// quarters y and runs a loop of 2 iterations that doubles y. Its count
// runs by copies, or, with setter, by a decrement and a set_flag that
// sets the loop's condition in the body's last kernel.
func sampledLoop(t *testing.T, trips, max int, setter bool) (*dag.Graph, *dag.Buffer, *dag.Buffer) {
	b := dag.New()
	x := b.Buffer("x", 64*4, dag.Value(1))
	y := b.Buffer("y", 64*4, dag.Value(1))
	inner := dagtest.NewCounter(b, "inner", 2)
	work := func(body *dag.Builder) {
		body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), x, 2.0, dag.Name("twice"))
		body.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), y, 0.25, dag.Name("quarter"))
		inner.Arm(body)
		body.While(inner.Flag.All(), func(ib *dag.Builder) {
			ib.Launch(dag.Scale, dag.Grid1(1), dag.Threads(64), y, 2.0, dag.Name("double"))
			inner.Step(ib)
		}, dag.AtMost(10), dag.Name("inner_loop"))
	}
	if setter {
		one := b.Buffer("one", 4, dag.Value(1))
		counter := b.Buffer("counter", 4)
		flag := b.Buffer("flag", 4, dag.Of(dag.I32))
		b.Fill(counter.All(), float64(trips), dag.Name("reset"))
		b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(counter.All()), 0.5, dag.Name("arm"))
		b.While(flag.All(), func(body *dag.Builder) {
			work(body)
			countDown(body, counter, one, flag, "again")
		}, dag.AtMost(int64(max)), dag.Name("loop"))
	} else {
		c := dagtest.NewCounter(b, "count", trips)
		c.Arm(b)
		b.While(c.Flag.All(), func(body *dag.Builder) {
			work(body)
			c.Step(body)
		}, dag.AtMost(int64(max)), dag.Name("loop"))
	}
	g, err := b.Build()
	require.NoError(t, err)
	loop := g.Ops[len(g.Ops)-1]
	assert.Equal(t, setter, loop.CondSetter() != nil, "the body's last kernel sets the condition")
	return g, x, y
}

// TestSampledLoopGPU: under CUPTI, an eager run of a loop that may run
// more than sampleIterations iterations has spans for its first ones op
// by op and counts them all on the loop's span; its outputs are the cpu
// backend's, a loop within it runs whole in every iteration, and one that
// reaches its max after the sample fails as the cpu backend's does. In a
// process of its own, as TestLoopIterationSpansGPU.
func TestSampledLoopGPU(t *testing.T) {
	if inFreshProcess(t, "TestSampledLoopGPU") {
		return
	}
	be := gpuBackend(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		trips, max  int
		setter      bool
		maxTripped  bool
		wantSampled bool
	}{
		{name: "long", trips: 40, max: 100, wantSampled: true},
		{name: "long, set_flag sets the condition", trips: 40, max: 100, setter: true, wantSampled: true},
		{name: "within the sample", trips: sampleIterations - 3, max: 100},
		{name: "max reached after the sample", trips: 40, max: 2 * sampleIterations, maxTripped: true},
		{name: "max within the sample: not sampled", trips: sampleIterations - 2, max: sampleIterations},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, x, y := sampledLoop(t, tc.trips, tc.max, tc.setter)
			p, err := planner.New(g, planner.Streams(2))
			require.NoError(t, err)

			ref, err := executor.Open(ctx, cpu.New(), p)
			require.NoError(t, err)
			defer ref.Close()
			refErr := errors.Join(ref.Run(ctx), ref.Run(ctx)) // as many runs as below

			s := openTraced(t, be, p)
			defer s.Close()
			for run := range 2 {
				err := s.Run(ctx)
				if tc.maxTripped {
					require.Error(t, refErr)
					require.Error(t, err, "run %d", run)
					assert.Contains(t, err.Error(), g.Ops[len(g.Ops)-1].Control.MaxReached().Error())
					continue
				}
				require.NoError(t, refErr)
				require.NoError(t, err, "run %d", run)
				timed := tc.trips
				if tc.wantSampled {
					timed = sampleIterations
				}
				spans, iterations := map[string]int{}, -1
				for _, sp := range s.Spans() {
					op := g.OpAt(sp.Op)
					spans[op.Name]++
					if op.Name == "loop" {
						iterations = sp.Iterations
					}
				}
				assert.Equal(t, timed, spans["twice"], "run %d: spans of the loop's body op", run)
				assert.Equal(t, 2*timed, spans["double"], "run %d: spans of the inner loop's body op", run)
				assert.Equal(t, 1, spans["loop"], "run %d: the loop's own span", run)
				if tc.wantSampled || tc.name == "within the sample" {
					assert.Equal(t, tc.trips, iterations, "run %d: the loop's count", run)
				} else {
					assert.Zero(t, iterations, "run %d: no count where every iteration is timed", run)
				}
			}
			if tc.maxTripped {
				return
			}
			for _, buf := range []*dag.Buffer{x, y} {
				want, err := ref.Read(buf)
				require.NoError(t, err)
				got, err := s.Read(buf)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%s equals the cpu backend's", buf.Name)
			}
		})
	}
}
