package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestPoolHoldsWhatTheBudgetOrders: three temporaries of 1 MiB, each
// filled and read once, with nothing ordering them, planned for a pool
// under a budget of two: the budget orders the uses of one after
// another's, and the later one's alloc waits for the earlier one's free
// too, which may run on another stream; otherwise the pool may hold both
// (it did in most runs). The plan counts 1 MiB; so must the pool, however
// the ops are timed.
func TestPoolHoldsWhatTheBudgetOrders(t *testing.T) {
	b := dag.New()
	d := b.Buffer("d", 16)
	for i, name := range []string{"a", "b", "c"} {
		tmp := b.Buffer(name, 1<<20, dag.Temporary())
		b.Fill(tmp.All(), float64(i+1))
		b.Copy(d.All(), tmp.Slice(0, 16))
	}
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(3), planner.PoolTemporaries(), planner.MemoryBudget(0, 2<<20))
	require.NoError(t, err)
	require.NotNil(t, p.Budget, "the budget orders temporaries")
	var planned int64
	for _, u := range p.Memory.Memories {
		if u.Device == 0 {
			planned = u.SubmittedPeak
		}
	}
	require.Equal(t, int64(1<<20), planned)
	for seed := range int64(10) {
		s, err := executor.Open(context.Background(), cpu.New(cpu.Delays(seed, 200*time.Microsecond)), p, executor.WithTemporaries(executor.TemporariesPool))
		require.NoError(t, err)
		require.NoError(t, s.Run(context.Background()))
		held, ok := s.MemoryHighWater()
		require.True(t, ok)
		assert.Equal(t, planned, held[0], "delays of seed %d: the pool's hold", seed)
		require.NoError(t, s.Close())
	}
}
