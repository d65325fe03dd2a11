package cpu_test

import (
	"context"
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

// examplePlans plans every example spec of the repository.
func examplePlans(t testing.TB) map[string]*planner.Plan {
	t.Helper()
	// Four small single-device examples of different shapes (the large
	// and multi-rank ones have tests of their own).
	var files []string
	for _, name := range []string{"double_buffer", "fan_out", "priority", "temporaries"} {
		files = append(files, filepath.Join("..", "examples", name+".yaml"))
	}
	plans := map[string]*planner.Plan{}
	for _, f := range files {
		s, err := spec.Load(f)
		require.NoError(t, err)
		opts := []planner.Option{planner.Streams(s.Run.Streams)}
		if s.Run.SharedCopyStreams {
			opts = append(opts, planner.SharedCopyStreams())
		}
		p, err := planner.New(s.Graph, opts...)
		require.NoError(t, err)
		plans[filepath.Base(f)] = p
	}
	return plans
}

// digestSeed makes digests comparable across sessions.
var digestSeed = maphash.MakeSeed()

// runDigests runs s runs times and returns, per run, a digest of every
// persistent buffer after it: runs carry their buffers over, so the digests
// of one run differ from the next where the example accumulates.
func runDigests(ctx context.Context, s *executor.Session, g *dag.Graph, runs int) ([]uint64, error) {
	out := make([]uint64, 0, runs)
	var h maphash.Hash
	h.SetSeed(digestSeed)
	for range runs {
		if err := s.Run(ctx); err != nil {
			return nil, err
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
		}
		out = append(out, h.Sum64())
	}
	return out, nil
}

// TestSessionsSideBySide opens a session of each of four different examples
// on one backend and runs them from four goroutines at once, 100 times each:
// every run's outputs equal those of the same run of the example alone on a
// backend of its own. Run it with -race; there (and with -short) each runs
// 20 times, as double_buffer's megabyte kernels take seconds a run under the
// race detector.
func TestSessionsSideBySide(t *testing.T) {
	runs := 100
	if raceEnabled || testing.Short() {
		runs = 20
	}
	ctx := context.Background()
	plans := examplePlans(t)
	names := make([]string, 0, len(plans))
	for name := range plans {
		names = append(names, name)
	}
	slices.Sort(names)
	names = names[:4]

	alone := map[string][]uint64{}
	for _, name := range names {
		p := plans[name]
		s, err := executor.Open(ctx, cpu.New(), p)
		require.NoError(t, err)
		alone[name], err = runDigests(ctx, s, p.Graph, runs)
		require.NoError(t, err, name)
		require.NoError(t, s.Close())
	}

	be := cpu.New()
	defer func() { require.NoError(t, be.Close()) }()
	sessions := make([]*executor.Session, len(names))
	for i, name := range names { // all open at once before any runs
		var err error
		sessions[i], err = executor.Open(ctx, be, plans[name])
		require.NoError(t, err, name)
	}
	assert.Equal(t, len(names), be.Sessions())
	together := make([][]uint64, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			together[i], errs[i] = runDigests(ctx, sessions[i], plans[name].Graph, runs)
		})
	}
	wg.Wait()
	for i, name := range names {
		require.NoError(t, errs[i], name)
		require.Equal(t, alone[name], together[i], "%s: outputs run beside other sessions differ from the runs alone", name)
		require.NoError(t, sessions[i].Close())
	}
	assert.Zero(t, be.Sessions())
}

// TestSessionsOpenCloseConcurrently opens, runs and closes sessions of one
// plan from several goroutines on one backend, and closes the backend with
// sessions still open: it closes them.
func TestSessionsOpenCloseConcurrently(t *testing.T) {
	ctx := context.Background()
	plans := examplePlans(t)
	p := plans["fan_out.yaml"]
	require.NotNil(t, p)
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	want, err := runDigests(ctx, s, p.Graph, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	be := cpu.New(cpu.Workers(2))
	var wg sync.WaitGroup
	errs := make(chan error, 8*10)
	for range 8 {
		wg.Go(func() {
			for range 10 {
				s, err := executor.Open(ctx, be, p)
				if err != nil {
					errs <- err
					return
				}
				got, err := runDigests(ctx, s, p.Graph, 1)
				if err == nil && got[0] != want[0] {
					err = assert.AnError
				}
				errs <- err
				if err := s.Close(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Zero(t, be.Sessions())

	left, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	require.NoError(t, be.Close())
	assert.Error(t, left.Run(ctx), "the backend's Close closed the session")
	require.NoError(t, left.Close())
	_, err = executor.Open(ctx, be, p)
	assert.Error(t, err, "a closed backend opens nothing")
}
