//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"hash/maphash"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// examplePlan is an example spec of the repository, planned.
type examplePlan struct {
	name string
	p    *planner.Plan
}

// examplePlans plans every example spec of the repository, in name order.
func examplePlans(t testing.TB) []examplePlan {
	t.Helper()
	// Four small single-device examples of different shapes (the large
	// and multi-rank ones have tests of their own).
	var files []string
	for _, name := range []string{"double_buffer", "fan_out", "priority", "temporaries"} {
		files = append(files, filepath.Join("..", "examples", name+".yaml"))
	}
	slices.Sort(files)
	var out []examplePlan
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err)
		p, err := planner.New(s.Graph, runOptions(s)...)
		require.NoError(t, err)
		out = append(out, examplePlan{name: filepath.Base(f), p: p})
	}
	return out
}

// digestSeed makes digests comparable across sessions.
var digestSeed = maphash.MakeSeed()

// runDigests runs s runs times and returns, per run, a digest of every
// persistent buffer after it; keep, if not nil, gets the contents after
// each of the first keepRuns runs.
func runDigests(ctx context.Context, s *executor.Session, g *dag.Graph, runs, keepRuns int, keep func(run int, b *dag.Buffer, data []byte)) ([]uint64, error) {
	out := make([]uint64, 0, runs)
	var h maphash.Hash
	h.SetSeed(digestSeed)
	for run := range runs {
		if err := s.Run(ctx); err != nil {
			return nil, fmt.Errorf("run %d: %w", run, err)
		}
		h.Reset()
		for _, b := range g.Buffers {
			if b.Temporary {
				continue
			}
			data, err := s.Read(b)
			if err != nil {
				return nil, err
			}
			h.Write(data)
			if keep != nil && run < keepRuns {
				keep(run, b, data)
			}
		}
		out = append(out, h.Sum64())
	}
	return out, nil
}

// TestSessionsSideBySide opens sessions of four different examples at once
// on one backend and runs them from four goroutines, 100 times each: every
// run's outputs equal, bit for bit, those of the same example run alone on
// the backend, and the first runs equal the CPU backend's (within the
// builtin kernels' one unit in the last place).
func TestSessionsSideBySide(t *testing.T) {
	const runs, compared = 100, 3
	b := gpuBackend(t)
	ctx := context.Background()
	examples := examplePlans(t)[:4]

	alone := make([][]uint64, len(examples))
	for i, ex := range examples {
		s, err := executor.Open(ctx, b, ex.p)
		require.NoError(t, err, ex.name)
		cs, err := executor.Open(ctx, cpu.New(), ex.p)
		require.NoError(t, err, ex.name)
		onCPU := map[[2]int][]byte{}
		_, err = runDigests(ctx, cs, ex.p.Graph, compared, compared, func(run int, buf *dag.Buffer, data []byte) {
			onCPU[[2]int{run, buf.ID}] = data
		})
		require.NoError(t, err, ex.name)
		require.NoError(t, cs.Close())
		alone[i], err = runDigests(ctx, s, ex.p.Graph, runs, compared, func(run int, buf *dag.Buffer, data []byte) {
			assert.NoError(t, sameContents(buf, data, onCPU[[2]int{run, buf.ID}], 1), "%s run %d: cuda against cpu", ex.name, run)
		})
		require.NoError(t, err, ex.name)
		require.NoError(t, s.Close())
	}
	assertReleased(t, b, "after the runs alone")

	sessions := make([]*executor.Session, len(examples))
	for i, ex := range examples { // all open before any runs
		var err error
		sessions[i], err = executor.Open(ctx, b, ex.p)
		require.NoError(t, err, ex.name)
	}
	require.Equal(t, len(examples), b.Sessions())
	together := make([][]uint64, len(examples))
	errs := make([]error, len(examples))
	var wg sync.WaitGroup
	for i, ex := range examples {
		wg.Go(func() {
			together[i], errs[i] = runDigests(ctx, sessions[i], ex.p.Graph, runs, 0, nil)
		})
	}
	wg.Wait()
	for i, ex := range examples {
		require.NoError(t, errs[i], ex.name)
		assert.Equal(t, alone[i], together[i], "%s: runs beside other sessions differ from runs alone", ex.name)
		require.NoError(t, sessions[i].Close(), ex.name)
	}
	assertReleased(t, b, "after the runs side by side")
}

// TestSessionsCaptureSideBySide captures a graph in each of four sessions
// from four goroutines at once and replays each 100 times: captures of one
// session must not disturb another's (relaxed capture mode, and no
// context-wide synchronisation anywhere in a session).
func TestSessionsCaptureSideBySide(t *testing.T) {
	const runs = 100
	b := gpuBackend(t)
	ctx := context.Background()
	examples := examplePlans(t)[:4]
	want := make([][]uint64, len(examples))
	for i, ex := range examples {
		s, err := executor.Open(ctx, b, ex.p)
		require.NoError(t, err)
		want[i], err = runDigests(ctx, s, ex.p.Graph, runs, 0, nil)
		require.NoError(t, err, ex.name)
		require.NoError(t, s.Close())
	}
	got := make([][]uint64, len(examples))
	errs := make([]error, len(examples))
	var wg sync.WaitGroup
	for i, ex := range examples {
		wg.Go(func() {
			errs[i] = func() (err error) {
				s, err := executor.Open(ctx, b, ex.p)
				if err != nil {
					return err
				}
				defer func() {
					if cerr := s.Close(); err == nil {
						err = cerr
					}
				}()
				g, err := s.Capture(ctx)
				if err != nil {
					return fmt.Errorf("capture: %w", err)
				}
				var h maphash.Hash
				h.SetSeed(digestSeed)
				for range runs {
					if err := g.Run(ctx); err != nil {
						return err
					}
					h.Reset()
					for _, buf := range ex.p.Graph.Buffers {
						if buf.Temporary {
							continue
						}
						data, err := s.Read(buf)
						if err != nil {
							return err
						}
						h.Write(data)
					}
					got[i] = append(got[i], h.Sum64())
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for i, ex := range examples {
		if executor.CheckCapture(ex.p) != nil {
			continue // an example a graph cannot hold is refused, as alone
		}
		require.NoError(t, errs[i], ex.name)
		assert.Equal(t, want[i], got[i], "%s: replays beside other sessions differ from eager runs alone", ex.name)
	}
	assertReleased(t, b, "after the captures")
}

// TestThousandSessions opens, runs and closes 1,000 sessions of the
// examples on one backend: free device memory and the backend's resources
// stay flat, and no session fails.
func TestThousandSessions(t *testing.T) {
	const sessions, every = 1000, 100
	b := gpuBackend(t)
	probe, err := newMemProbe(b.drv)
	require.NoError(t, err)
	defer probe.close()
	ctx := context.Background()
	examples := examplePlans(t)
	once := func(i int) error {
		ex := examples[i%len(examples)]
		s, err := executor.Open(ctx, b, ex.p)
		if err != nil {
			return fmt.Errorf("session %d (%s): open: %w", i, ex.name, err)
		}
		rerr := s.Run(ctx)
		if cerr := s.Close(); rerr == nil {
			rerr = cerr
		}
		if rerr != nil {
			return fmt.Errorf("session %d (%s): %w", i, ex.name, rerr)
		}
		return nil
	}
	// The first round loads the modules and fills the memory pool; after it
	// the backend holds what it keeps for good.
	for i := range 2 * len(examples) {
		require.NoError(t, once(i))
	}
	base := b.Live()
	before, err := probe.free()
	require.NoError(t, err)
	for i := range sessions {
		require.NoError(t, once(i))
		if i%every == every-1 {
			assert.Equal(t, base, b.Live(), "after %d sessions", i+1)
			after, err := probe.free()
			require.NoError(t, err)
			assert.InDelta(t, float64(before), float64(after), 4<<20, "after %d sessions: free device memory %d, at the start %d", i+1, after, before)
		}
	}
	assertReleased(t, b, "after 1,000 sessions")
	assert.Equal(t, base, b.Live())
}

// TestBackendCloseClosesSessions closes a backend with sessions open on
// it: it closes them, releases everything and refuses further Opens.
func TestBackendCloseClosesSessions(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	ex := examplePlans(t)[0]
	s1, err := executor.Open(ctx, b, ex.p)
	require.NoError(t, err)
	s2, err := executor.Open(ctx, b, ex.p)
	require.NoError(t, err)
	require.NoError(t, s1.Run(ctx))
	require.Equal(t, 2, b.Sessions())
	require.NoError(t, b.Close())
	assert.Zero(t, b.Live().Total(), "%+v", b.Live())
	assert.Error(t, s2.Run(ctx), "its backend closed it")
	require.NoError(t, s1.Close())
	require.NoError(t, s2.Close())
	_, err = executor.Open(ctx, b, ex.p)
	assert.Error(t, err, "a closed backend opens nothing")
}
