package executor_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// Two goroutines replaying one graph, one of them with a context that
// ends: the misuse is an error, and neither call outlives its context.
func TestGraphRunFromTwoGoroutines(t *testing.T) {
	for try := range 3 {
		b := cpu.New()
		s, err := executor.Open(context.Background(), b, spinPlan(t, 200, 10_000)) // 2 s if nothing stops it
		require.NoError(t, err)
		g, err := s.Capture(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = g.Run(ctx) })
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatalf("try %d: Graph.Run outlived its context", try)
		}
		cancel()
		require.Error(t, errs[0])
		require.Error(t, errs[1])
		assert.Contains(t, errs[0].Error()+errs[1].Error(), "another call of the session or of its graphs is in flight")
		require.NoError(t, s.Close())
		require.NoError(t, b.Close())
	}
}

// Many sessions and graphs on one backend, closed from other goroutines
// while they run, capture and replay: no race, no hang, nothing left open.
func TestCloseFromAnyGoroutine(t *testing.T) {
	base := runtime.NumGoroutine()
	b := cpu.New()
	p := spinPlan(t, 20, 200)
	var wg sync.WaitGroup
	for i := range 8 {
		s, err := executor.Open(context.Background(), b, p)
		require.NoError(t, err)
		g, err := s.Capture(context.Background())
		require.NoError(t, err)
		wg.Go(func() { // the session's user: runs, captures, replays
			for k := 0; ; k++ {
				var err error
				switch k % 3 {
				case 0:
					err = s.Run(context.Background())
				case 1:
					var g2 *executor.Graph
					if g2, err = s.Capture(context.Background()); err == nil {
						err = g2.Run(context.Background())
					}
				default:
					err = g.Run(context.Background())
				}
				if err != nil && k > 2 {
					return
				}
			}
		})
		wg.Go(func() { // closers, at once and mid-flight
			time.Sleep(time.Duration(i) * 3 * time.Millisecond)
			var cw sync.WaitGroup
			cw.Go(func() { assert.NoError(t, g.Close()) })
			cw.Go(func() { s.Close() })
			cw.Go(func() { s.Close() })
			cw.Wait()
			assert.NoError(t, g.Close())
			assert.NoError(t, s.Close())
		})
	}
	wg.Wait()
	assert.Zero(t, b.Sessions())
	require.NoError(t, b.Close())
	settled(t, base)
}

// World.Close from two goroutines at once closes the world once.
func TestWorldCloseFromTwoGoroutines(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	w, err := executor.OpenWorld(context.Background(), b, []*planner.Plan{spinPlan(t, 2, 10), spinPlan(t, 2, 10)})
	require.NoError(t, err)
	go w.Run(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { w.Close() })
	}
	wg.Wait()
	assert.Error(t, w.Run(context.Background()))
	assert.Zero(t, b.Sessions())
}
