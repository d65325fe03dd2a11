//go:build cgo

package cuda

import (
	"context"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCUPTIFlushNotForced: a session timed by CUPTI gets every op's span
// run after run, and every replay's, from CUPTI's default flush after the
// Sync, without forcing one (a forced flush holds the next run's first op
// back by about 0.25 ms on the H100). The submission time of each run's
// first step is logged beside the others'.
func TestCUPTIFlushNotForced(t *testing.T) {
	be := gpuBackend(t)
	ctx := context.Background()
	g := chains(2, 4, dag.Spin, 10, false)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	s, err := executor.Open(ctx, be, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
	require.NoError(t, err)
	defer s.Close()
	if src, why, _ := s.TimingSource(); src != TimingCUPTI {
		requireGPU(t, "CUPTI timing not used: %s", why)
		t.Skipf("CUPTI timing not used: %s", why)
	}
	d := s.Device().(*Session)
	const runs = 10
	var first, rest []time.Duration
	for run := range runs {
		for i, st := range p.Steps {
			start := time.Now()
			switch st.Kind {
			case planner.Run:
				err = d.Run(int(st.Stream), g.Ops[st.Op])
			case planner.Record:
				err = d.Record(int(st.Stream), int(st.Event))
			case planner.Wait:
				err = d.Wait(int(st.Stream), int(st.Event))
			}
			require.NoError(t, err)
			if run > 0 && i == 0 {
				first = append(first, time.Since(start))
			} else if run > 0 {
				rest = append(rest, time.Since(start))
			}
		}
		require.NoError(t, d.Sync(ctx))
		n := 0
		require.NoError(t, d.Spans(func(op, stream int, start, end time.Duration) { n++ }))
		assert.Equal(t, len(g.Ops), n, "run %d: a span per op", run)
	}
	assert.Zero(t, d.tim.cupti.forced, "flushes forced over %d eager runs", runs)

	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	defer gr.Close()
	gr.Spans() // what the capture left
	for batch := range 5 {
		for range 20 {
			require.NoError(t, gr.Launch(ctx))
		}
		require.NoError(t, gr.Sync(ctx))
		reps, err := gr.ReplaySpans()
		require.NoError(t, err)
		require.Len(t, reps, 20, "batch %d", batch)
		for _, r := range reps {
			assert.Len(t, r.Spans, len(g.Ops), "batch %d, replay %d", batch, r.Launch)
		}
	}
	t.Logf("first step of a run: median %v; the others: median %v; flushes forced: %d (eager runs and 5 batches of replays); sink: %v",
		median(first), median(rest), d.tim.cupti.forced, d.tim.cupti.tr.stats())
}
