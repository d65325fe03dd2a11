package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// earlyChain is a chain of n small builtin kernels on x (scale and axpy
// taking turns) and a reduction of x into sum: every launch after the
// first is one the planner launches early.
func earlyChain(t *testing.T, n int) (*dag.Graph, *dag.Buffer, *dag.Buffer) {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4096*4, dag.Random(7))
	y := b.Buffer("y", 4096*4, dag.Random(8))
	sum := b.Buffer("sum", 4, dag.Zeros())
	for i := range n {
		if i%2 == 0 {
			b.Launch(dag.Scale, dag.Grid1(4), dag.Grid1(256), x, 1.5)
		} else {
			b.Launch(dag.Axpy, dag.Grid1(4), dag.Grid1(256), x, y, -0.25)
		}
	}
	b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Grid1(256), sum, x)
	g, err := b.Build()
	require.NoError(t, err)
	return g, x, sum
}

// Plans with early launches give the CPU backend's results byte for byte,
// eagerly and replayed; the cpu backend says it launches them plainly.
func TestEarlyLaunchesSameResultsOnCPU(t *testing.T) {
	ctx := context.Background()
	g, x, sum := earlyChain(t, 20)
	results := map[planner.EarlyLaunching][][]byte{}
	for _, e := range []planner.EarlyLaunching{planner.EarlyNone, planner.EarlyAuto} {
		p, err := planner.New(g, planner.Streams(1), planner.Early(e), planner.Verify())
		require.NoError(t, err)
		if e == planner.EarlyAuto {
			require.Equal(t, 20, p.EarlyOps(), "every launch after the first")
		} else {
			require.Zero(t, p.EarlyOps())
		}
		for _, replay := range []bool{false, true} {
			s, err := executor.Open(ctx, cpu.New(), p)
			require.NoError(t, err)
			n, why := s.EarlyLaunches()
			assert.Zero(t, n)
			if e == planner.EarlyAuto {
				assert.Contains(t, why, "launches every kernel after the one before it ends")
			} else {
				assert.Empty(t, why)
			}
			if replay {
				cg, err := s.Capture(ctx)
				require.NoError(t, err)
				require.NoError(t, cg.Run(ctx))
			} else {
				require.NoError(t, s.Run(ctx))
			}
			gx, err := s.Read(x)
			require.NoError(t, err)
			gs, err := s.Read(sum)
			require.NoError(t, err)
			results[e] = append(results[e], gx, gs)
			require.NoError(t, s.Close())
		}
	}
	assert.Equal(t, results[planner.EarlyNone], results[planner.EarlyAuto])
}
