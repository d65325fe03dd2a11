//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// planSteps are p's top-level steps as a device session takes them (the
// plan's streams and events are the session's first).
func planSteps(p *planner.Plan) []device.Step {
	steps := make([]device.Step, len(p.Steps))
	for i, st := range p.Steps {
		d := device.Step{Stream: int(st.Stream), Event: int(st.Event)}
		switch st.Kind {
		case planner.Run:
			d.Kind, d.Op, d.Event = device.RunStep, p.Graph.Ops[st.Op], 0
		case planner.Record:
			d.Kind = device.RecordStep
		case planner.Wait:
			d.Kind = device.WaitStep
		}
		steps[i] = d
	}
	return steps
}

// TestLoopTraceCostGPU splits the eager runs of TestLoopTraceGPU's loop
// into submission and wait, and the reading of their spans, beside the
// replays, after the clocks are warm; and runs it with CUPTI's graph-level
// records on around the loop's launch and around the whole run.
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
	dp, dt := joined(plain.Device().(*Session)), joined(traced.Device().(*Session))
	steps := planSteps(p)
	at := -1
	for i, st := range steps {
		if st.Kind == device.RunStep && st.Op == loop {
			at = i
		}
	}
	require.GreaterOrEqual(t, at, 0)
	timed := func(f func() error) time.Duration {
		start := time.Now()
		require.NoError(t, f())
		return time.Since(start)
	}
	submit := func(se *Session, steps []device.Step) error {
		_, err := se.Submit(steps)
		return err
	}
	direct := func(se *Session) time.Duration {
		return timed(func() error {
			if err := submit(se, steps); err != nil {
				return err
			}
			return se.Sync(ctx)
		})
	}
	for range 3 {
		require.NoError(t, plain.Run(ctx))
		require.NoError(t, traced.Run(ctx))
	}
	gOff, err := plain.Capture(ctx)
	require.NoError(t, err)
	defer gOff.Close()
	gOn, err := traced.Capture(ctx)
	require.NoError(t, err)
	defer gOn.Close()
	_, err = gOn.ReplaySpans()
	require.NoError(t, err)
	for range 30 { // clocks up
		require.NoError(t, gOff.Run(ctx))
	}
	execOff, execOn := dp.ctl.controls[opSlot(loop)].exec, dt.ctl.controls[opSlot(loop)].exec
	replay := func(gr *executor.Graph) time.Duration {
		return timed(func() error {
			if err := gr.Launch(ctx); err != nil {
				return err
			}
			return gr.Sync(ctx)
		})
	}
	c := dt.tim.cupti
	tr := c.tr
	var runOff, runOn, subOff, subOn, spansOn, loopSpan, repOff, repOn, repSpans, glLoop, glRun, glToggle []time.Duration
	forced := c.forced
	nspans, nrep := 0, 0
	for i := range reps {
		runOff = append(runOff, timed(func() error { return plain.Run(ctx) }))
		runOn = append(runOn, timed(func() error { return traced.Run(ctx) }))
		subOff = append(subOff, direct(dp))
		subOn = append(subOn, direct(dt))
		var ls time.Duration
		nspans = 0
		spansOn = append(spansOn, timed(func() error {
			return dt.Spans(func(op, _ int, start, end time.Duration) {
				nspans++
				if op == opSlot(loop) {
					ls = end - start
				}
			})
		}))
		loopSpan = append(loopSpan, ls)
		repOff = append(repOff, replay(gOff))
		repOn = append(repOn, replay(gOn))
		var rs []executor.ReplaySpans
		repSpans = append(repSpans, timed(func() (err error) { rs, err = gOn.ReplaySpans(); return err }))
		if len(rs) == 1 {
			nrep = len(rs[0].Spans)
		}

		// CUPTI's graph-level records: around the loop's launch alone ...
		var toggle time.Duration
		glLoop = append(glLoop, timed(func() error {
			if err := submit(dt, steps[:at]); err != nil {
				return err
			}
			t0 := time.Now()
			if err := tr.setKind(activityGraphLaunch, true); err != nil {
				return err
			}
			toggle += time.Since(t0)
			if err := submit(dt, steps[at:at+1]); err != nil {
				return err
			}
			t0 = time.Now()
			if err := tr.setKind(activityGraphLaunch, false); err != nil {
				return err
			}
			toggle += time.Since(t0)
			if err := submit(dt, steps[at+1:]); err != nil {
				return err
			}
			return dt.Sync(ctx)
		}))
		glToggle = append(glToggle, toggle)
		logRecs := func(what string) {
			recs, err := c.collect()
			require.NoError(t, err)
			kinds := map[string]int{}
			var gl []string
			for _, r := range recs {
				kinds[r.Kind.String()]++
				if r.Kind == activityGraphLaunch {
					gl = append(gl, fmt.Sprintf("%v op %d", time.Duration(r.End-r.Start), r.Op))
				}
			}
			c.reset()
			if i == 0 || i == reps-1 {
				t.Logf("%s, run %d: records %v, graph launches %v", what, i, kinds, gl)
			}
		}
		logRecs("graph trace around the loop")
		// ... and around the whole run.
		require.NoError(t, tr.setKind(activityGraphLaunch, true))
		glRun = append(glRun, direct(dt))
		require.NoError(t, tr.setKind(activityGraphLaunch, false))
		logRecs("graph trace around the run")
	}
	us := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / 1e3 / iters }
	t.Logf("per iteration, us: Run off %.2f on %.2f; Submit+Sync off %.2f on %.2f, the traced run's Spans %.2f (%d spans, loop span %.2f, %d forced flushes); "+
		"replay off %.2f on %.2f, ReplaySpans %.2f (%d spans); graph trace around the loop %.2f (toggles %s), around the run %.2f",
		us(runOff), us(runOn), us(subOff), us(subOn), us(spansOn), nspans, us(loopSpan), c.forced-forced,
		us(repOff), us(repOn), us(repSpans), nrep, us(glLoop), median(glToggle), us(glRun))
	assert.Equal(t, execOff, dp.ctl.controls[opSlot(loop)].exec, "the untraced eager graph was made once")
	assert.Equal(t, execOn, dt.ctl.controls[opSlot(loop)].exec, "the traced eager graph was made once")
}
