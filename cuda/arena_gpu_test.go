//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// TestArenaGPU runs graphs whose temporaries the plan packs into arenas
// (random graphs, and the memory families: chains, fork-joins, layered,
// pipelines) on many streams: with the arena, with the pool, and captured
// with the arena and replayed twice, each equal to the CPU backend's run.
// A captured arena graph holds no memory nodes; closing frees the arenas.
// In the pool, the eager run's measure is checked (checkPoolHighWater) and
// the replays leave it as it is.
func TestArenaGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	var band bandCount
	for i := range 24 {
		var g *dag.Graph
		if i%2 == 0 {
			g = dagtest.Random(dagtest.Config{Ops: 40 + i%60, Buffers: 6 + i%8, Seed: int64(i), Temporaries: true, Ranges: i%3 == 0, After: i%5 == 0})
		} else {
			fams := dagtest.Families()
			g = dagtest.Family(fams[i/2%len(fams)], 6+i%20, int64(i))
		}
		p, err := planner.New(g, planner.Streams(2+i%7))
		require.NoError(t, err)
		require.NoError(t, verify.Verify(p))
		// The CPU backend's buffers after one run and after three (an
		// eager run and two replays).
		want := make([]map[*dag.Buffer][]byte, 4)
		ref, err := executor.Open(ctx, cpu.New(), p)
		require.NoError(t, err)
		for run := 1; run <= 3; run++ {
			require.NoError(t, ref.Run(ctx), "graph %d on the cpu backend", i)
			if run == 1 || run == 3 {
				want[run] = map[*dag.Buffer][]byte{}
				for _, buf := range g.Buffers {
					if !buf.Temporary {
						want[run][buf], err = ref.Read(buf)
						require.NoError(t, err)
					}
				}
			}
		}
		require.NoError(t, ref.Close())
		check := func(what string, s *executor.Session, runs int) {
			t.Helper()
			for _, buf := range g.Buffers {
				if buf.Temporary {
					continue
				}
				got, err := s.Read(buf)
				require.NoError(t, err)
				require.NoError(t, sameContents(buf, got, want[runs][buf], 1), "graph %d %s: buffer %s", i, what, buf.Name)
			}
		}
		for _, mode := range []executor.TemporaryMode{executor.TemporariesArena, executor.TemporariesPool} {
			s, err := executor.Open(ctx, b, p, executor.WithTemporaries(mode))
			require.NoError(t, err)
			if mode == executor.TemporariesArena && len(p.Memory.Temporaries) > 0 {
				assert.True(t, s.Arenas(), "graph %d: the cuda session holds its temporaries in arenas", i)
			}
			require.NoError(t, s.Run(ctx))
			check(mode.String()+" eager", s, 1)
			var eager map[int]int64
			if mode == executor.TemporariesPool {
				eager = checkPoolHighWater(t, fmt.Sprintf("graph %d", i), p, s, &band, nil) // pool_highwater_gpu_test.go
			}
			if len(g.LiveAtEnd()) == 0 {
				gr, err := s.Capture(ctx)
				require.NoError(t, err)
				for range 2 {
					require.NoError(t, gr.Run(ctx))
				}
				check(mode.String()+" replayed", s, 3)
				if mode == executor.TemporariesPool {
					after, _ := s.MemoryHighWater()
					assert.Equal(t, eager, after, "graph %d: replays draw on graph memory, not the pool", i)
				}
			}
			require.NoError(t, s.Close())
		}
		assertReleased(t, b, "after the sessions closed")
	}
	t.Logf("the pool's measure within 2 MiB of the planned peak: checked on %d memories, %d left out by the plans' steps", band.checked, band.outside)
}
