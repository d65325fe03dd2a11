//go:build cgo

package cuda

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestLoopGraphTraceGPU runs TestLoopTraceGPU's loop eagerly untraced,
// traced, and traced with CUPTI's graph-level records enabled for the
// whole run beside the kernel records, warm, and logs what each costs and
// which spans the last gives.
func TestLoopGraphTraceGPU(t *testing.T) {
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
	tr := joined(traced.Device().(*Session)).tim.cupti.tr
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
	var off, on, gt []time.Duration
	var spansOn, spansGT, top int
	var loopOn, loopGT time.Duration
	for range reps {
		off = append(off, timed(func() error { return plain.Run(ctx) }))
		on = append(on, timed(func() error { return traced.Run(ctx) }))
		spansOn = len(traced.Spans())
		for _, sp := range traced.Spans() {
			if sp.Op == loop.Index {
				loopOn = sp.End - sp.Start
			}
		}
		require.NoError(t, tr.setKind(activityGraphLaunch, true))
		gt = append(gt, timed(func() error { return traced.Run(ctx) }))
		require.NoError(t, tr.setKind(activityGraphLaunch, false))
		spansGT, top, loopGT = len(traced.Spans()), 0, 0
		for _, sp := range traced.Spans() {
			if sp.Op < len(g.Ops) {
				top++
			}
			if sp.Op == loop.Index {
				loopGT = sp.End - sp.Start
			}
		}
	}
	us := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / 1e3 / iters }
	t.Logf("warm, us per iteration: untraced %.2f, traced %.2f (%d spans, loop span %v), traced with graph-level records %.2f "+
		"(%d spans, %d of top-level ops, loop span %v)", us(off), us(on), spansOn, loopOn, us(gt), spansGT, top, loopGT)
}
