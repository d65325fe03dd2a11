//go:build cgo

package cuda

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
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
// condition), timed with CUPTI against the same plan untraced, each in a
// process of its own (TestLoopTraceGPU).

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

// loopTracing is what measureLoopTracing measured, per run (medians);
// its fields are exported for TestLoopTraceGPU's processes to pass it on.
type loopTracing struct {
	Iters                int
	EagerOff, EagerOn    time.Duration // an eager run, untraced and traced
	ReplayOff, ReplayOn  time.Duration // a replay launched alone, to its Sync
	Span                 time.Duration // the loop's span in a traced replay
	EagerSpan            time.Duration // ... and in a traced eager run
	EagerSpans, RepSpans int           // spans of one traced eager run and replay
	// Of the last traced eager run: the spans of a body op, and the
	// loop's count on its span (a sample timed, loopsample.go).
	EagerBodySpans, EagerIters int
}

func (m loopTracing) perIter(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(m.Iters)
}

// eagerRatio and coverage are the two goals' figures.
func (m loopTracing) eagerRatio() float64 { return float64(m.EagerOn) / float64(m.EagerOff) }
func (m loopTracing) coverage() float64   { return float64(m.Span) / float64(m.ReplayOn) }

// The halves of measureLoopTracing, each measured in a process of its own.
const (
	untracedHalf = 1 + iota
	tracedHalf
)

// measureLoopTracing runs traceLoop(iters) reps times each way on be, as
// half says: untraced, eagerly then replayed; or traced (CUPTI), eagerly
// then replayed, the traced session running eagerly before it captures,
// as dagrun run's automatic capture does. The two never share a process:
// CUPTI's collection is the process's, so while a traced session is open
// every session's kernels are recorded (an untraced run of this loop took
// 1.4-3.4x its time alone on the H200); and once a process has run the
// loop before CUPTI attached, a traced session runs it slower (12.9
// against 11.0 ms on the H200, whether that run was on the same Backend
// or not; opening a session without running it costs nothing).
func measureLoopTracing(tb testing.TB, be *Backend, iters, reps, half int) loopTracing {
	g, loop := traceLoop(tb, iters)
	p, err := planner.New(g, planner.Streams(1))
	require.NoError(tb, err)
	ctx := context.Background()
	m := loopTracing{Iters: iters}
	if half == untracedHalf {
		m.EagerOff, m.ReplayOff = measureUntraced(tb, be, p, reps)
		return m
	}
	traced := openTraced(tb, be, p)
	defer traced.Close()
	warmUp(tb, traced)
	var on, eagerSpans []time.Duration
	for i := range reps + 1 {
		if d := timedRun(tb, func() error { return traced.Run(ctx) }); i > 0 {
			on = append(on, d)
			eagerSpans = append(eagerSpans, loopSpan(traced.Spans(), loop))
		}
	}
	m.EagerOn, m.EagerSpans = median(on), len(traced.Spans())
	for _, sp := range traced.Spans() {
		switch {
		case sp.Op == loop.Index:
			m.EagerIters = sp.Iterations
		case sp.Op == loop.Control.Body.Ops[0].Index:
			m.EagerBodySpans++
		}
	}
	m.EagerSpan = median(eagerSpans)
	gOn, err := traced.Capture(ctx)
	require.NoError(tb, err)
	defer gOn.Close()
	_, err = gOn.ReplaySpans() // what the capture left
	require.NoError(tb, err)
	on = on[:0]
	var spans []time.Duration
	for i := range reps + 1 {
		d := replayAlone(tb, gOn)
		rs, err := gOn.ReplaySpans()
		require.NoError(tb, err)
		require.Len(tb, rs, 1)
		m.RepSpans = len(rs[0].Spans)
		if i > 0 {
			on, spans = append(on, d), append(spans, loopSpan(rs[0].Spans, loop))
		}
	}
	m.ReplayOn, m.Span = median(on), median(spans)
	return m
}

// measureUntraced is measureLoopTracing's untraced half: the medians of
// reps eager runs of p and of reps replays.
func measureUntraced(tb testing.TB, be *Backend, p *planner.Plan, reps int) (eager, replayed time.Duration) {
	ctx := context.Background()
	plain, err := executor.Open(ctx, be, p)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, plain.Close()) }()
	warmUp(tb, plain)
	var off []time.Duration
	for i := range reps + 1 { // the first of each warms up
		if d := timedRun(tb, func() error { return plain.Run(ctx) }); i > 0 {
			off = append(off, d)
		}
	}
	eager = median(off)
	gOff, err := plain.Capture(ctx)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, gOff.Close()) }()
	off = off[:0]
	for i := range reps + 1 {
		if d := replayAlone(tb, gOff); i > 0 {
			off = append(off, d)
		}
	}
	return eager, median(off)
}

// timedRun is how long f took; f's error fails tb.
func timedRun(tb testing.TB, f func() error) time.Duration {
	start := time.Now()
	require.NoError(tb, f())
	return time.Since(start)
}

// replayAlone times one replay of g, launched and waited for.
func replayAlone(tb testing.TB, g *executor.Graph) time.Duration {
	ctx := context.Background()
	return timedRun(tb, func() error {
		if err := g.Launch(ctx); err != nil {
			return err
		}
		return g.Sync(ctx)
	})
}

// warmUp runs s for 300 ms, to bring the clocks up: an idle GPU runs
// slower (GPU.md), and this loop is launch-bound.
func warmUp(tb testing.TB, s *executor.Session) {
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		require.NoError(tb, s.Run(context.Background()))
	}
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
// BenchmarkLoopTracing measures too, not a test's verdict. The untraced
// runs and the traced ones each run in a fresh process of their own, as
// dagrun run's would (measureLoopTracing says why).
func TestLoopTraceGPU(t *testing.T) {
	if half, _ := strconv.Atoi(os.Getenv(loopTraceHalfEnv)); half != 0 {
		reps, _ := strconv.Atoi(os.Getenv(loopTraceRepsEnv))
		m := measureLoopTracing(t, gpuBackend(t), 1000, max(reps, 5), half)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		t.Logf("%s%s", loopTraceMark, b)
		return
	}
	gpuBackend(t) // skips or fails here as every GPU test does
	m := loopTraceFresh(t, 5)
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	ratio, cover := m.eagerRatio(), m.coverage()
	t.Logf("loop trace: eager untraced %.2f us/iter, traced %.2f us/iter (ratio %.3f, goal <= %.1f: %s, %d spans, the loop's span %.2f us/iter); "+
		"replay untraced %.2f us/iter, traced %.2f us/iter, loop span %s of %s (coverage %.3f, goal >= %.1f: %s, %d spans)",
		m.perIter(m.EagerOff), m.perIter(m.EagerOn), ratio, maxTracedEager, verdict(ratio <= maxTracedEager), m.EagerSpans, m.perIter(m.EagerSpan),
		m.perIter(m.ReplayOff), m.perIter(m.ReplayOn), m.Span, m.ReplayOn, cover, minLoopCoverage, verdict(cover >= minLoopCoverage), m.RepSpans)
	assert.GreaterOrEqual(t, cover, minLoopCoverage, "the loop's span in a traced replay against the replay's wall time")
	assert.Equal(t, sampleIterations, m.EagerBodySpans, "a traced eager run times a sample of the iterations op by op")
	assert.Equal(t, m.Iters, m.EagerIters, "... and counts them all")
	assert.Greater(t, m.EagerSpan, m.EagerOn/2, "the loop's span in a traced eager run covers the iterations not sampled")
	assert.LessOrEqual(t, m.Span, m.ReplayOn, "the loop's span within its replay")
}

// loopTraceHalfEnv selects the half of measureLoopTracing that a process
// of TestLoopTraceGPU measures and loopTraceRepsEnv its reps (at least
// 5); loopTraceMark starts the line of JSON it logs.
const (
	loopTraceHalfEnv = "DAGRUN_LOOP_TRACE_HALF"
	loopTraceRepsEnv = "DAGRUN_LOOP_TRACE_REPS"
	loopTraceMark    = "loop trace half: "
)

// loopTraceFresh measures the untraced half and then the traced half of
// measureLoopTracing, each in a fresh process (loopTraceHalf).
func loopTraceFresh(tb testing.TB, reps int) loopTracing {
	m := loopTraceHalf(tb, untracedHalf, reps)
	traced := loopTraceHalf(tb, tracedHalf, reps)
	m.EagerOn, m.ReplayOn, m.Span, m.EagerSpan = traced.EagerOn, traced.ReplayOn, traced.Span, traced.EagerSpan
	m.EagerSpans, m.RepSpans, m.EagerBodySpans, m.EagerIters = traced.EagerSpans, traced.RepSpans, traced.EagerBodySpans, traced.EagerIters
	return m
}

// loopTraceHalf runs TestLoopTraceGPU in a fresh process that measures
// half with reps runs each way, and returns what it measured.
func loopTraceHalf(tb testing.TB, half, reps int) loopTracing {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLoopTraceGPU$", "-test.v")
	cmd.Env = append(os.Environ(), loopTraceHalfEnv+"="+strconv.Itoa(half), loopTraceRepsEnv+"="+strconv.Itoa(reps))
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "the process of half %d:\n%s", half, out)
	_, line, ok := bytes.Cut(out, []byte(loopTraceMark))
	require.True(tb, ok, "the process of half %d logged no figures:\n%s", half, out)
	line, _, _ = bytes.Cut(line, []byte("\n"))
	var m loopTracing
	require.NoError(tb, json.Unmarshal(line, &m), "the process of half %d:\n%s", half, out)
	return m
}

// BenchmarkLoopTracing times the loop of TestLoopTraceGPU, 1000
// iterations, untraced and traced, eager and replayed, b.N runs each way
// (at least 5), each half in a fresh process as TestLoopTraceGPU does:
// us/iter each way, the traced/untraced ratios, a traced eager run's loop
// span per iteration (the device's part of that run: the rest of it is
// the host's), and a traced replay's loop span over its wall time.
func BenchmarkLoopTracing(b *testing.B) {
	gpuBackend(b) // skips or fails here as every GPU test does
	m := loopTraceFresh(b, b.N)
	b.ReportMetric(m.perIter(m.EagerOff), "eager-off-us/iter")
	b.ReportMetric(m.perIter(m.EagerOn), "eager-on-us/iter")
	b.ReportMetric(m.eagerRatio(), "eager-on/off")
	b.ReportMetric(m.perIter(m.EagerSpan), "eager-span-us/iter")
	b.ReportMetric(m.perIter(m.ReplayOff), "replay-off-us/iter")
	b.ReportMetric(m.perIter(m.ReplayOn), "replay-on-us/iter")
	b.ReportMetric(float64(m.ReplayOn)/float64(m.ReplayOff), "replay-on/off")
	b.ReportMetric(m.coverage(), "span/wall")
}
