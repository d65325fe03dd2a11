package trace_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/trace"
)

// pipeline is a plan with copies both ways, two compute streams, a
// temporary buffer and waits: upload, double, busy, triple, add, download.
func pipeline(t testing.TB) *planner.Plan {
	t.Helper()
	b := dag.New()
	in := b.Buffer("in", 1<<20, dag.PinnedHost(), dag.Random(1))
	x := b.Buffer("x", 1<<20, dag.Zeros())
	y := b.Buffer("y", 1<<20, dag.Value(1))
	sum := b.Buffer("sum", 1<<20, dag.Temporary())
	out := b.Buffer("out", 1<<20, dag.PinnedHost(), dag.Zeros())
	b.Copy(x.All(), in.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), x, 2.0, dag.Name("double"))
	b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 50.0, dag.Name("busy"))
	b.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), y, 3.0, dag.Name("triple"))
	b.Launch(dag.Add, dag.Grid1(64), dag.Grid1(256), sum, x, y, dag.Name("add"))
	b.Copy(out.All(), sum.All(), dag.Name("download"))
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	return p
}

// simulatedSpans runs p's steps in a simple model (each op takes 10 µs plus
// 1 µs per op ID, a wait costs 2 µs of latency) and returns the spans a
// backend would report, starting at origin.
func simulatedSpans(p *planner.Plan, origin time.Duration) []executor.Span {
	streamTime := make([]time.Duration, len(p.Streams))
	eventTime := make([]time.Duration, p.Events)
	var spans []executor.Span
	for _, st := range p.Steps {
		switch st.Kind {
		case planner.Run:
			d := 10*time.Microsecond + time.Duration(st.Op)*time.Microsecond
			start := streamTime[st.Stream]
			spans = append(spans, executor.Span{Op: int(st.Op), Stream: int(st.Stream), Start: origin + start, End: origin + start + d})
			streamTime[st.Stream] = start + d
		case planner.Record:
			eventTime[st.Event] = streamTime[st.Stream]
		case planner.Wait:
			streamTime[st.Stream] = max(streamTime[st.Stream], eventTime[st.Event]+2*time.Microsecond)
		}
	}
	return spans
}

func opNamed(t testing.TB, p *planner.Plan, name string) *dag.Op {
	t.Helper()
	for _, op := range p.Graph.Ops {
		if op.Name == name {
			return op
		}
	}
	t.Fatalf("no op %q", name)
	return nil
}

func TestFromRun(t *testing.T) {
	p := pipeline(t)
	tr := trace.FromRun(p, simulatedSpans(p, time.Second))

	require.Len(t, tr.Lanes, len(p.Streams))
	for i, l := range tr.Lanes {
		s := p.Streams[l.Stream]
		assert.Equal(t, s.Name, l.Name)
		assert.Equal(t, s.Priority, l.Priority)
		assert.Equal(t, s.Kind, l.Kind)
		assert.Equal(t, "GPU 0", l.Process())
		assert.Equal(t, s.Name+" (priority normal)", l.Title())
		if i > 0 {
			assert.LessOrEqual(t, tr.Lanes[i-1].Kind, l.Kind, "compute lanes come before copy lanes")
		}
	}

	require.Len(t, tr.Slices, len(p.Graph.Ops))
	assert.Equal(t, time.Duration(0), minStart(tr), "times start at the earliest span")
	for _, s := range tr.Slices {
		op := p.Graph.Ops[s.Op]
		assert.Equal(t, op.Name, s.Name)
		assert.Equal(t, op.Kind, s.Kind)
		assert.Equal(t, int(p.OpStream[s.Op]), tr.Lanes[s.Lane].Stream, "op %s", s.Name)
		assert.Equal(t, 10*time.Microsecond+time.Duration(s.Op)*time.Microsecond, s.Dur)
	}
	add := sliceOf(t, tr, "add")
	assert.Equal(t, dag.Grid1(64), add.Grid)
	assert.Equal(t, dag.Grid1(256), add.Block)
	assert.Equal(t, []string{"x", "y"}, add.Reads)
	assert.Equal(t, []string{"sum"}, add.Writes)
	assert.Equal(t, int64(3<<20), add.Bytes)

	// One flow per wait step, from the recording op to the op after the wait.
	var waits int
	recorded := map[int32]int32{}
	want := map[[2]string]bool{}
	for _, st := range p.Steps {
		switch st.Kind {
		case planner.Record:
			recorded[st.Event] = st.Op
		case planner.Wait:
			waits++
			want[[2]string{p.Graph.Ops[recorded[st.Event]].Name, p.Graph.Ops[st.Op].Name}] = true
		}
	}
	require.Len(t, tr.Flows, waits)
	for _, f := range tr.Flows {
		from, to := tr.Slices[f.From], tr.Slices[f.To]
		assert.True(t, want[[2]string{from.Name, to.Name}], "flow %s -> %s", from.Name, to.Name)
		assert.LessOrEqual(t, from.End()+2*time.Microsecond, to.Start, "the op after a wait starts after the recording op")
	}
	assert.Equal(t, p.Stats.Waits, tr.Figures.Waits)
	assert.False(t, tr.Figures.Estimated)
	// upload (10) -> double (11) -> alloc:sum? The longest chain through the
	// measured durations ends at free:sum; it can only be below the makespan.
	assert.Positive(t, tr.Figures.CriticalPath)
	assert.LessOrEqual(t, tr.Figures.CriticalPath, tr.Makespan())
}

func TestFromRunIgnoresBadSpans(t *testing.T) {
	p := pipeline(t)
	upload := opNamed(t, p, "upload")
	tr := trace.FromRun(p, []executor.Span{
		{Op: -1, Stream: 0, Start: 0, End: 5},
		{Op: 1000, Stream: 0, Start: 0, End: 5},
		{Op: upload.ID, Stream: 99, Start: 7, End: 3}, // unknown stream, end before start
	})
	require.Len(t, tr.Slices, 1)
	s := tr.Slices[0]
	assert.Equal(t, "upload", s.Name)
	assert.Equal(t, int(p.OpStream[upload.ID]), tr.Lanes[s.Lane].Stream, "drawn on its planned stream")
	assert.Equal(t, time.Duration(0), s.Dur)
	assert.Empty(t, tr.Flows)

	assert.Empty(t, trace.FromRun(nil, nil).Lanes)
	assert.Empty(t, trace.FromPlan(nil, nil).Slices)
}

func TestFromPlanMatchesPlannerEstimate(t *testing.T) {
	p := pipeline(t)
	tr := trace.FromPlan(p, nil)
	require.Len(t, tr.Slices, len(p.Graph.Ops))
	assert.True(t, tr.Figures.Estimated)
	assert.Equal(t, p.Stats.Makespan, tr.Makespan(), "the simulation is the planner's")
	assert.Equal(t, p.Stats.CriticalPath, tr.Figures.CriticalPath)
	busy := sliceOf(t, tr, "busy")
	assert.Equal(t, 51*time.Microsecond, busy.Dur, "spin 50 µs plus the launch latency")

	// A measured cost model moves ops.
	tr2 := trace.FromPlan(p, perf.Measured(map[string]time.Duration{"busy": time.Millisecond}, nil))
	assert.Equal(t, time.Millisecond, sliceOf(t, tr2, "busy").Dur)
	assert.Greater(t, tr2.Makespan(), time.Millisecond)
}

func minStart(tr *trace.Trace) time.Duration {
	m := tr.Slices[0].Start
	for _, s := range tr.Slices {
		m = min(m, s.Start)
	}
	return m
}

func sliceOf(t testing.TB, tr *trace.Trace, name string) trace.Slice {
	t.Helper()
	for _, s := range tr.Slices {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no slice %q", name)
	return trace.Slice{}
}

func BenchmarkFromRun(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("spans=%d", n), func(b *testing.B) {
			p, spans := bigRun(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				trace.FromRun(p, spans)
			}
		})
	}
}

// bigRun is a plan of n ops and the spans of a run of it.
func bigRun(b *testing.B, n int) (*planner.Plan, []executor.Span) {
	g := dagtest.Shape(n, 8, 1)
	p, err := planner.New(g)
	require.NoError(b, err)
	return p, simulatedSpans(p, 0)
}

// TestFromRuns: several runs lie one after another at their starts, each
// with its own flows, and the summary sums each run up.
func TestFromRuns(t *testing.T) {
	p := pipeline(t)
	one := trace.FromRun(p, simulatedSpans(p, 0))
	runs := []trace.RunSpans{
		{Run: 2, Start: 0, Spans: simulatedSpans(p, 5*time.Microsecond)},
		{Run: 3, Start: time.Millisecond, Spans: simulatedSpans(p, 5*time.Microsecond)},
	}
	tr := trace.FromRuns(p, runs)
	require.Len(t, tr.Slices, 2*len(one.Slices))
	require.Len(t, tr.Flows, 2*len(one.Flows))
	assert.Equal(t, one.Figures.CriticalPath, tr.Figures.CriticalPath)
	for _, fl := range tr.Flows {
		assert.Equal(t, tr.Slices[fl.From].Run, tr.Slices[fl.To].Run, "a flow links ops of one run")
	}
	assert.Equal(t, time.Millisecond+one.Makespan(), tr.Makespan())

	s := tr.Summarize()
	require.Len(t, s.Runs, 2)
	assert.Equal(t, []int{2, 3}, []int{s.Runs[0].Run, s.Runs[1].Run})
	assert.Equal(t, time.Duration(0), s.Runs[0].Start)
	assert.Equal(t, time.Millisecond, s.Runs[1].Start)
	assert.Equal(t, one.Makespan(), s.Runs[1].Makespan)
	assert.Nil(t, one.Summarize().Runs, "one run has no per-run summary")

	// The runs survive a round trip through the Chrome trace.
	var buf bytes.Buffer
	require.NoError(t, tr.WriteChrome(&buf))
	back, err := trace.ReadChrome(&buf)
	require.NoError(t, err)
	assert.Len(t, back.Summarize().Runs, 2)
}
