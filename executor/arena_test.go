package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// arenaGraphs are random graphs with temporaries and the memory families,
// whose temporaries run on many streams.
func arenaGraphs(n int) []*dag.Graph {
	var gs []*dag.Graph
	for i := range n {
		if i%2 == 0 {
			gs = append(gs, dagtest.Random(dagtest.Config{Ops: 40 + i%60, Buffers: 6 + i%8, Seed: int64(i), Temporaries: true,
				Ranges: i%3 == 0, HostBuffers: i%4 == 0, Devices: 1 + i%2, After: i%5 == 0}))
			continue
		}
		fams := dagtest.Families()
		gs = append(gs, dagtest.Family(fams[i/2%len(fams)], 6+i%20, int64(i)))
	}
	return gs
}

// runCaptured captures p once and replays it twice, reading every
// persistent buffer after.
func runCaptured(t *testing.T, b *cpu.Backend, p *planner.Plan, opts ...executor.Option) map[string][]byte {
	ctx := context.Background()
	s, err := executor.Open(ctx, b, p, opts...)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	g, err := s.Capture(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Run(ctx))
	require.NoError(t, g.Run(ctx))
	out := map[string][]byte{}
	for _, buf := range p.Graph.Buffers {
		if !buf.Temporary {
			data, err := s.Read(buf)
			require.NoError(t, err)
			out[buf.Name] = data
		}
	}
	return out
}

// TestArenaMatchesPoolAndSequential runs graphs with temporaries on many
// streams with their temporaries in arenas and in the pool, with random
// delays before ops so that timings vary: both give what a run on one
// stream gives. Under -race it also proves that temporaries sharing arena
// bytes are ordered by the plan's events.
func TestArenaMatchesPoolAndSequential(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 16
	}
	for i, g := range arenaGraphs(n) {
		seq, err := planner.New(g, planner.Streams(1))
		require.NoError(t, err)
		p, err := planner.New(g, planner.Streams(2+i%7))
		require.NoError(t, err)
		require.NoError(t, verify.Verify(p))
		b := cpu.New(cpu.Workers(1+i%4), cpu.Delays(int64(i), 20*time.Microsecond))
		want, err := runOnce(t, b, seq, executor.WithTemporaries(executor.TemporariesPool))
		require.NoError(t, err)
		pool, err := runOnce(t, b, p, executor.WithTemporaries(executor.TemporariesPool))
		require.NoError(t, err)
		arena, err := runOnce(t, b, p, executor.WithTemporaries(executor.TemporariesArena))
		require.NoError(t, err)
		require.Equal(t, want, pool, "graph %d: pool", i)
		require.Equal(t, want, arena, "graph %d: arena", i)
		if len(g.LiveAtEnd()) == 0 && i%4 != 0 { // graphs cannot hold pageable copies
			require.Equal(t, runCaptured(t, b, p, executor.WithTemporaries(executor.TemporariesPool)),
				runCaptured(t, b, p, executor.WithTemporaries(executor.TemporariesArena)), "graph %d: captured", i)
		}
		require.NoError(t, b.Close())
	}
}

// TestArenaIsTheDefault: a session on the CPU backend holds its
// temporaries in arenas unless told otherwise, and runs repeatedly.
func TestArenaIsTheDefault(t *testing.T) {
	g := dagtest.Family("forkjoin", 12, 1)
	p, err := planner.New(g, planner.Streams(4))
	require.NoError(t, err)
	b := cpu.New()
	defer b.Close()
	ctx := context.Background()
	s, err := executor.Open(ctx, b, p)
	require.NoError(t, err)
	defer s.Close()
	require.True(t, s.Arenas())
	for range 3 {
		require.NoError(t, s.Run(ctx))
	}
	s2, err := executor.Open(ctx, b, p, executor.WithTemporaries(executor.TemporariesPool))
	require.NoError(t, err)
	require.False(t, s2.Arenas())
	require.NoError(t, s2.Close())
}
