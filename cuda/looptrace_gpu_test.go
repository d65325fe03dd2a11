//go:build cgo

package cuda

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// The cost of tracing a loop, and whether a traced replay times it: a
// loop of 9 empty kernels, a count down and set_flag (which sets the
// condition), timed with CUPTI against the same plan untraced before, in
// one process.

// Goals of a traced loop: an eager traced run at most maxTracedEager of
// the untraced one, and a replay's loop span at least minLoopCoverage of
// the replay's wall time.
const (
	maxTracedEager  = 1.3
	minLoopCoverage = 0.9
)

// traceLoop is that loop, of iters iterations, after a fill and a
// set_flag that arm it.
func traceLoop(t testing.TB, iters int) (*dag.Graph, *dag.Op) {
	b := dag.New()
	x := b.Buffer("x", 4, dag.Zeros())
	nf := b.Buffer("nf", 4)
	flag := b.Buffer("flag", 4, dag.Of(dag.I32))
	b.Kernel(emptyKernel)
	b.Kernel(decfKernel)
	b.Fill(nf.All(), float64(iters), dag.Name("reset"))
	b.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(nf.All()), 0.5, dag.Name("arm"))
	loop := b.While(flag.All(), func(body *dag.Builder) {
		for i := range 9 {
			body.Launch(emptyKernel, dag.Grid1(1), dag.Threads(1), x, dag.Name("empty"+strconv.Itoa(i)))
		}
		body.Launch(decfKernel, dag.Grid1(1), dag.Threads(1), nf, dag.Name("dec"))
		body.Launch(dag.SetFlag, dag.Grid1(1), dag.Threads(1), dag.Out(flag.All()), dag.In(nf.All()), 0.5, dag.Name("again"))
	}, dag.AtMost(int64(2*iters)), dag.Name("loop"))
	g, err := b.Build()
	require.NoError(t, err)
	return g, loop
}

// loopTracing is what measureLoopTracing measured, per run (medians).
type loopTracing struct {
	iters                int
	eagerOff, eagerOn    time.Duration // an eager run, untraced and traced
	replayOff, replayOn  time.Duration // a replay launched alone, to its Sync
	span                 time.Duration // the loop's span in a traced replay
	eagerSpan            time.Duration // ... and in a traced eager run
	eagerSpans, repSpans int           // spans of one traced eager run and replay
	// Of the last traced eager run: the spans of a body op, and the
	// loop's count on its span (a sample timed, loopsample.go).
	eagerBodySpans, eagerIters int
}

func (m loopTracing) perIter(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(m.iters)
}

// eagerRatio and coverage are the two goals' figures.
func (m loopTracing) eagerRatio() float64 { return float64(m.eagerOn) / float64(m.eagerOff) }
func (m loopTracing) coverage() float64   { return float64(m.span) / float64(m.replayOn) }

// measureLoopTracing runs traceLoop(iters) reps times each way on be:
// untraced first, eagerly then replayed, with no traced session open;
// then traced (CUPTI), eagerly then replayed, the traced session running
// eagerly before it captures, as dagrun run's automatic capture does.
// Untraced runs are never timed beside a traced session: CUPTI's
// collection is the process's, so while one is open every session's
// kernels are recorded (an untraced run of this loop took 1.4-3.4x its
// time alone on the H200).
func measureLoopTracing(tb testing.TB, be *Backend, iters, reps int) loopTracing {
	g, loop := traceLoop(tb, iters)
	p, err := planner.New(g, planner.Streams(1))
	require.NoError(tb, err)
	ctx := context.Background()
	m := loopTracing{iters: iters}
	timed := func(f func() error) time.Duration {
		start := time.Now()
		require.NoError(tb, f())
		return time.Since(start)
	}
	replay := func(gr *executor.Graph) time.Duration {
		return timed(func() error {
			if err := gr.Launch(ctx); err != nil {
				return err
			}
			return gr.Sync(ctx)
		})
	}
	// warm brings the clocks up first: an idle GPU runs slower (GPU.md),
	// and this loop is launch-bound.
	warm := func(s *executor.Session) {
		for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
			require.NoError(tb, s.Run(ctx))
		}
	}

	plain, err := executor.Open(ctx, be, p)
	require.NoError(tb, err)
	warm(plain)
	var off []time.Duration
	for i := range reps + 1 { // the first of each warms up
		if d := timed(func() error { return plain.Run(ctx) }); i > 0 {
			off = append(off, d)
		}
	}
	m.eagerOff = median(off)
	gOff, err := plain.Capture(ctx)
	require.NoError(tb, err)
	off = off[:0]
	for i := range reps + 1 {
		if d := replay(gOff); i > 0 {
			off = append(off, d)
		}
	}
	m.replayOff = median(off)
	require.NoError(tb, gOff.Close())
	require.NoError(tb, plain.Close())

	traced := openTraced(tb, be, p)
	defer traced.Close()
	warm(traced)
	var on, eagerSpans []time.Duration
	for i := range reps + 1 {
		if d := timed(func() error { return traced.Run(ctx) }); i > 0 {
			on = append(on, d)
			eagerSpans = append(eagerSpans, loopSpan(traced.Spans(), loop))
		}
	}
	m.eagerOn, m.eagerSpans = median(on), len(traced.Spans())
	for _, sp := range traced.Spans() {
		switch {
		case sp.Op == loop.Index:
			m.eagerIters = sp.Iterations
		case sp.Op == loop.Control.Body.Ops[0].Index:
			m.eagerBodySpans++
		}
	}
	m.eagerSpan = median(eagerSpans)
	gOn, err := traced.Capture(ctx)
	require.NoError(tb, err)
	defer gOn.Close()
	_, err = gOn.ReplaySpans() // what the capture left
	require.NoError(tb, err)
	on = on[:0]
	var spans []time.Duration
	for i := range reps + 1 {
		d := replay(gOn)
		rs, err := gOn.ReplaySpans()
		require.NoError(tb, err)
		require.Len(tb, rs, 1)
		m.repSpans = len(rs[0].Spans)
		if i > 0 {
			on, spans = append(on, d), append(spans, loopSpan(rs[0].Spans, loop))
		}
	}
	m.replayOn, m.span = median(on), median(spans)
	return m
}

// loopSpan is the length of loop's span among spans, 0 without one.
func loopSpan(spans []executor.Span, loop *dag.Op) time.Duration {
	for _, sp := range spans {
		if sp.Op == loop.Index {
			return sp.End - sp.Start
		}
	}
	return 0
}

// TestLoopTraceGPU: a traced replay's span of a loop of 1000 iterations
// covers at least minLoopCoverage of the replay's wall time, on the
// device's clock, and lies within it. It logs one line with the figures
// and verdicts, the eager cost of tracing against maxTracedEager among
// them, which scripts/gpu/loops.sh reports; that cost is a speed, which
// BenchmarkLoopTracing measures, not a test's verdict.
func TestLoopTraceGPU(t *testing.T) {
	be := gpuBackend(t)
	m := measureLoopTracing(t, be, 1000, 5)
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	ratio, cover := m.eagerRatio(), m.coverage()
	t.Logf("loop trace: eager untraced %.2f us/iter, traced %.2f us/iter (ratio %.3f, goal <= %.1f: %s, %d spans, the loop's span %.2f us/iter); "+
		"replay untraced %.2f us/iter, traced %.2f us/iter, loop span %s of %s (coverage %.3f, goal >= %.1f: %s, %d spans)",
		m.perIter(m.eagerOff), m.perIter(m.eagerOn), ratio, maxTracedEager, verdict(ratio <= maxTracedEager), m.eagerSpans, m.perIter(m.eagerSpan),
		m.perIter(m.replayOff), m.perIter(m.replayOn), m.span, m.replayOn, cover, minLoopCoverage, verdict(cover >= minLoopCoverage), m.repSpans)
	assert.GreaterOrEqual(t, cover, minLoopCoverage, "the loop's span in a traced replay against the replay's wall time")
	assert.Equal(t, sampleIterations, m.eagerBodySpans, "a traced eager run times a sample of the iterations op by op")
	assert.Equal(t, m.iters, m.eagerIters, "... and counts them all")
	assert.Greater(t, m.eagerSpan, m.eagerOn/2, "the loop's span in a traced eager run covers the iterations not sampled")
	assert.LessOrEqual(t, m.span, m.replayOn, "the loop's span within its replay")
}

// BenchmarkLoopTracing times the loop of TestLoopTraceGPU, 1000
// iterations, untraced and traced, eager and replayed, in the same run:
// us/iter each way, the traced/untraced ratios, a traced eager run's loop
// span per iteration (the device's part of that run: the rest of it is
// the host's), and a traced replay's loop span over its wall time. Only
// the first round's untraced runs come before any tracer of the process:
// after one, the loop runs about 7% slower untraced too (CUPTI stays
// attached), so the ratio of the rounds reported is lower than a fresh
// process's, which TestLoopTraceGPU gives.
func BenchmarkLoopTracing(b *testing.B) {
	be := gpuBackend(b)
	m := measureLoopTracing(b, be, 1000, max(b.N, 3))
	b.ReportMetric(m.perIter(m.eagerOff), "eager-off-us/iter")
	b.ReportMetric(m.perIter(m.eagerOn), "eager-on-us/iter")
	b.ReportMetric(m.eagerRatio(), "eager-on/off")
	b.ReportMetric(m.perIter(m.eagerSpan), "eager-span-us/iter")
	b.ReportMetric(m.perIter(m.replayOff), "replay-off-us/iter")
	b.ReportMetric(m.perIter(m.replayOn), "replay-on-us/iter")
	b.ReportMetric(float64(m.replayOn)/float64(m.replayOff), "replay-on/off")
	b.ReportMetric(m.coverage(), "span/wall")
}
