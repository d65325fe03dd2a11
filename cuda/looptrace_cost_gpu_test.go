//go:build cgo

package cuda

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestLoopTraceCostGPU says where the time of a traced eager run of
// TestLoopTraceGPU's loop goes, warm: the loop's span on the device
// against the run's wall time; and, for a traced replay of it (the same
// records), CUPTI's flushes, the naming of the records and the reading of
// the spans, each timed apart. Then it launches a replay with kernel
// records disabled around the launch, and logs what records came.
func TestLoopTraceCostGPU(t *testing.T) {
	be := gpuBackend(t)
	const iters, reps = 1000, 7
	g, loop := traceLoop(t, iters)
	p, err := planner.New(g, planner.Streams(1))
	require.NoError(t, err)
	ctx := context.Background()
	plain, err := executor.Open(ctx, be, p)
	require.NoError(t, err)
	defer plain.Close()
	traced, err := executor.Open(ctx, be, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
	require.NoError(t, err)
	defer traced.Close()
	if src, why, _ := traced.TimingSource(); src != TimingCUPTI {
		requireGPU(t, "timing by %s, not CUPTI: %s", src, why)
	}
	se := joined(traced.Device().(*Session))
	c := se.tim.cupti
	timed := func(f func() error) time.Duration {
		start := time.Now()
		require.NoError(t, f())
		return time.Since(start)
	}
	warm := time.Now()
	for time.Since(warm) < 300*time.Millisecond {
		require.NoError(t, plain.Run(ctx))
		require.NoError(t, traced.Run(ctx))
	}
	var off, on, loopSpan []time.Duration
	for range reps {
		off = append(off, timed(func() error { return plain.Run(ctx) }))
		on = append(on, timed(func() error { return traced.Run(ctx) }))
		for _, sp := range traced.Spans() {
			if sp.Op == loop.Index {
				loopSpan = append(loopSpan, sp.End-sp.Start)
			}
		}
	}
	gOn, err := traced.Capture(ctx)
	require.NoError(t, err)
	defer gOn.Close()
	_, err = gOn.ReplaySpans()
	require.NoError(t, err)
	var launch, soft, forced, resolve, spans, whole []time.Duration
	nsoft, nforced := 0, 0
	for range reps {
		launch = append(launch, timed(func() error {
			if err := gOn.Launch(ctx); err != nil {
				return err
			}
			return gOn.Sync(ctx)
		}))
		soft = append(soft, timed(func() error { return c.tr.take(false) }))
		nsoft = len(c.tr.recs)
		forced = append(forced, timed(func() error { return c.tr.take(true) }))
		nforced = len(c.tr.recs) - nsoft
		var recs []activityRecord
		resolve = append(resolve, timed(func() error { recs = c.tr.resolvePending(); return nil }))
		c.loops = se.ctl.loops
		spans = append(spans, timed(func() error {
			c.spans(recs, 1<<16, func(replay, op, stream int, start, end time.Duration) {})
			return nil
		}))
		c.reset()
		require.NoError(t, gOn.Launch(ctx))
		require.NoError(t, gOn.Sync(ctx))
		whole = append(whole, timed(func() error { _, err := gOn.ReplaySpans(); return err }))
	}
	us := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / 1e3 / iters }
	t.Logf("warm, us per iteration: eager untraced %.2f, traced %.2f, the traced run's loop span %.2f; "+
		"a traced replay %.2f; of its records: default flush %.2f (%d records), forced flush %.2f (%d), naming %.2f, spans %.2f; ReplaySpans %.2f",
		us(off), us(on), us(loopSpan), us(launch), us(soft), nsoft, us(forced), nforced, us(resolve), us(spans), us(whole))

	// Kernel records off around a replay's launch.
	var toggle time.Duration
	toggle += timed(func() error { return c.tr.setKind(activityKernel, false) })
	require.NoError(t, gOn.Launch(ctx))
	toggle += timed(func() error { return c.tr.setKind(activityKernel, true) })
	require.NoError(t, gOn.Sync(ctx))
	require.NoError(t, c.tr.take(true))
	kinds := map[string]int{}
	for _, r := range c.tr.resolvePending() {
		kinds[r.Kind.String()]++
	}
	c.reset()
	t.Logf("kernel records off around a replay's launch: toggles %v, records %v", toggle, kinds)
	require.NoError(t, traced.Run(ctx))
	n := len(traced.Spans())
	t.Logf("an eager traced run after: %d spans", n)
	assert.Greater(t, n, 3, "kernel records again")
}
