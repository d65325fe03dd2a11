package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
)

// TestMemoryHighWater runs graphs with temporaries on the CPU backend, with
// random delays, and compares what the session measured with the plan's
// memory: in arenas the arena's size exactly; in the pool at least the
// largest temporary and at most all of them, and at most the planned peak
// where the plan orders each Alloc after the Frees it could reuse (the
// planner's placement; counted, not required, since the pool's live set
// runs from an Alloc to a Free and the peak counts uses).
func TestMemoryHighWater(t *testing.T) {
	n := 30
	if testing.Short() {
		n = 10
	}
	ctx := context.Background()
	over := 0
	for i, g := range arenaGraphs(n) {
		p, err := planner.New(g, planner.Streams(2+i%5))
		require.NoError(t, err)
		b := cpu.New(cpu.Workers(1+i%3), cpu.Delays(int64(i), 10*time.Microsecond))
		for _, mode := range []executor.TemporaryMode{executor.TemporariesPool, executor.TemporariesArena} {
			s, err := executor.Open(ctx, b, p, executor.WithTemporaries(mode))
			require.NoError(t, err)
			require.NoError(t, s.Run(ctx))
			require.NoError(t, s.Run(ctx))
			got, ok := s.MemoryHighWater()
			require.True(t, ok)
			require.NoError(t, s.Close())
			for _, u := range p.Memory.Memories {
				if u.Temporaries == 0 {
					require.Zero(t, got[u.Device])
					continue
				}
				if mode == executor.TemporariesArena {
					require.Equal(t, u.ArenaBytes, got[u.Device], "graph %d, %s", i, plan.MemoryName(u.Device))
					continue
				}
				var largest int64
				for _, tm := range p.Memory.Temporaries {
					if tm.Device == u.Device && tm.Alloc >= 0 {
						largest = max(largest, tm.Bytes)
					}
				}
				require.GreaterOrEqual(t, got[u.Device], largest, "graph %d, %s", i, plan.MemoryName(u.Device))
				require.LessOrEqual(t, got[u.Device], u.TemporaryBytes, "graph %d, %s", i, plan.MemoryName(u.Device))
				if got[u.Device] > u.TemporaryPeak {
					over++
				}
			}
		}
		b.Close()
	}
	t.Logf("the pool's measured high water above the planned peak in %d memories", over)
}

// MemoryReports sets each memory's planned temporaries against what the
// session measured: in arenas, the arena's size; a budget below it is an
// error of that memory.
func TestMemoryReports(t *testing.T) {
	ctx := context.Background()
	g := arenaGraphs(1)[0]
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	b := cpu.New()
	defer b.Close()
	s, err := executor.Open(ctx, b, p, executor.WithTemporaries(executor.TemporariesArena))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Run(ctx))
	budget := map[int]int64{}
	for _, u := range p.Memory.Memories {
		budget[u.Device] = 1
	}
	rs := executor.MemoryReports(s, budget)
	require.NotEmpty(t, rs)
	for _, r := range rs {
		require.True(t, r.Arena)
		require.NotNil(t, r.MeasuredPeakBytes)
		require.Equal(t, r.PlannedArenaBytes, *r.MeasuredPeakBytes)
		require.Empty(t, r.Warning)
		require.ErrorContains(t, r.OverBudget(), "over the memory budget of 1 B")
		require.Contains(t, r.String(), "(arena)")
	}
	require.Empty(t, executor.MemoryReports(s, nil)[0].OverBudget())
}
