//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// TestCUPTISessionTiming times a fan-out of spins, a copy and a fill with a
// session's CUPTI timing and again with events: every op of device work has
// one span under CUPTI, on the stream it ran on, its duration lies within
// the event-timed one (up to the events' resolution), and a spin's
// duration is its length within 5 us.
func TestCUPTISessionTiming(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	src := g.Buffer("src", 1<<20, dag.Zeros())
	dst := g.Buffer("dst", 1<<20, dag.Zeros())
	fill := g.Fill(src.All(), 7, dag.Name("fill"))
	g.Copy(dst.All(), src.All(), dag.Name("copy"), dag.After(fill))
	for i := range 4 {
		g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), float64(20*(i+1)), dag.Name(fmt.Sprintf("spin%d", i)))
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(2))
	require.NoError(t, err)

	cupti, cstreams, how := sessionDurations(t, b, graph, p, TimingAuto)
	if len(cupti) == 0 || how[:len(TimingCUPTI)] != TimingCUPTI {
		requireGPU(t, "CUPTI timing not used: %s", how)
	}
	events, _, _ := sessionDurations(t, b, graph, p, TimingEvents)
	t.Logf("timing: %s", how)
	require.Len(t, cupti, len(graph.Ops), "every op here does device work")
	for _, st := range p.Steps {
		if st.Kind == planner.Run {
			assert.Equal(t, int(st.Stream), cstreams[int(st.Op)], "op %s", graph.Ops[st.Op].Name)
		}
	}
	for op, c := range cupti {
		e := events[op]
		t.Logf("%-6s cupti %v events %v", graph.Ops[op].Name, c, e)
		// Events bracket the op on its stream, so they also count the
		// gap before the work starts on the device (a launch's latency,
		// or longer when the host was slow to submit the op after the
		// first event): CUPTI's duration lies within them, up to the
		// events' resolution (0.5 us). The events' excess has no upper
		// bound that holds on a busy host; CUPTI's own accuracy is
		// checked against the spins' known lengths instead.
		assert.LessOrEqual(t, c, e+time.Microsecond/2, "op %s: CUPTI's time lies within the events'", graph.Ops[op].Name)
		if l := graph.Ops[op].Launch; l != nil && l.Kernel == dag.Spin {
			us := time.Duration(l.Args[0].Float * float64(time.Microsecond))
			assert.GreaterOrEqual(t, c, us, "op %s: a spin of %v", graph.Ops[op].Name, us)
			assert.Less(t, c, us+5*time.Microsecond, "op %s: a spin of %v", graph.Ops[op].Name, us)
		}
	}
}

// sessionDurations runs p twice on a session of b timed by src and returns
// the second run's duration and stream of each op, and how it was timed.
func sessionDurations(t *testing.T, b *Backend, graph *dag.Graph, p *planner.Plan, src string) (map[int]time.Duration, map[int]int, string) {
	t.Helper()
	se := openSession(t, b, graph)
	defer func() { require.NoError(t, se.Close()) }()
	se.tim.SetTiming(true)
	require.NoError(t, se.tim.SetTimingSource(device.TimingSource(src)))
	used, why, _ := se.tim.TimingSource()
	d, streams := map[int]time.Duration{}, map[int]int{}
	for run := range 2 { // the first run warms up
		require.NoError(t, runPlan(context.Background(), se, p, run == 0))
		clear(d)
		require.NoError(t, se.tim.Spans(func(op, stream int, start, end time.Duration) {
			assert.Less(t, start, end, "op %d", op)
			_, twice := d[op]
			assert.False(t, twice, "op %d has two spans", op)
			d[op], streams[op] = end-start, stream
		}))
	}
	_, _, dropped := se.tim.TimingSource()
	assert.Zero(t, dropped)
	return d, streams, string(used) + ": " + why
}

// TestCUPTIEventsAgree compares CUPTI's and the events' durations of the
// same ops where events can be exact: one stream, every op queued behind a
// 500 us spin before the device reaches it, so that an op's start event is
// taken the moment the op before it ends, and nothing of the host's
// submission falls between an op's events. What remains between the two
// is the device's own step from one command to the next. The figures are
// logged (AGREE) for BENCHMARKS.md.
func TestCUPTIEventsAgree(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	src := g.Buffer("src", 1<<20, dag.Zeros())
	dst := g.Buffer("dst", 1<<20, dag.Zeros())
	prev := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 500.0, dag.Name("gate"))
	chain := func(o *dag.Op) { o.With(dag.After(prev)); prev = o }
	chain(g.Fill(src.All(), 7, dag.Name("fill")))
	chain(g.Copy(dst.All(), src.All(), dag.Name("copy")))
	for i, us := range []float64{5, 20, 80} {
		chain(g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), us, dag.Name(fmt.Sprintf("spin%d", i))))
	}
	chain(g.Launch(dag.Empty, dag.Grid1(1), dag.Grid1(32), dag.Name("empty")))
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(1))
	require.NoError(t, err)
	cupti, _, how := sessionDurations(t, b, graph, p, TimingCUPTI)
	if len(cupti) != len(graph.Ops) {
		requireGPU(t, "CUPTI timing not used: %s", how)
	}
	events, _, _ := sessionDurations(t, b, graph, p, TimingEvents)
	var worst time.Duration
	var line []string
	for _, op := range graph.Ops[1:] { // the gate waits for the host's submission
		c, e := cupti[op.ID], events[op.ID]
		line = append(line, fmt.Sprintf("%s %v/%v", op.Name, c, e))
		if d := (e - c).Abs(); d > worst {
			worst = d
		}
		// Events bracket the op: CUPTI's time lies within them, up to the
		// events' resolution (0.5 us); they exceed it by the device's step
		// into the op, which a few microseconds bound here.
		assert.LessOrEqual(t, c, e+time.Microsecond/2, "op %s: CUPTI's time lies within the events'", op.Name)
		assert.Less(t, e-c, 5*time.Microsecond, "op %s: cupti %v, events %v", op.Name, c, e)
	}
	t.Logf("AGREE cupti/events per op, queued behind a gate: %s; largest difference %v", strings.Join(line, ", "), worst)
}

// TestCUPTISessionReplay captures a plan of spins and replays it with the
// session's CUPTI timing: each replay's spans name every op, through the
// node each op's capture made (GRAPHNODE_CREATED while the op was pushed)
// and the clone instantiation made of it, on the op's stream, with its
// spin's duration.
func TestCUPTISessionReplay(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	var prev *dag.Op
	for i := range 6 {
		o := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 20.0, dag.Name(fmt.Sprintf("spin%d", i)))
		if i%2 == 1 && prev != nil {
			o.With(dag.After(prev))
		}
		prev = o
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(3))
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, b, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	if src, why, _ := s.TimingSource(); src != TimingCUPTI {
		requireGPU(t, "CUPTI timing not used: %s", why)
	}
	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, gr.Close()) }()
	gr.Spans()
	for range 2 {
		require.NoError(t, gr.Run(ctx))
		spans := gr.Spans()
		require.Len(t, spans, len(graph.Ops), "every replayed op has its span: %+v", spans)
		for _, sp := range spans {
			assert.Equal(t, int(p.OpStream[sp.Op]), sp.Stream, "op %d", sp.Op)
			assert.GreaterOrEqual(t, sp.End-sp.Start, 18*time.Microsecond, "op %d", sp.Op)
		}
	}
}

// TestCUPTISessionReplayBatch replays a captured plan of spins, a fill and
// a copy 20 times back to back with the session's CUPTI timing and one
// Sync: ReplaySpans gives each replay, numbered by its launch, every op's
// span exactly once, on the op's stream, and on each stream a replay's
// ops end before the next replay's begin. A second batch goes on from
// launch 21.
func TestCUPTISessionReplayBatch(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	src := g.Buffer("src", 1<<20, dag.Zeros())
	dst := g.Buffer("dst", 1<<20, dag.Zeros())
	fill := g.Fill(src.All(), 7, dag.Name("fill"))
	g.Copy(dst.All(), src.All(), dag.Name("copy"), dag.After(fill))
	var prev *dag.Op
	for i := range 6 {
		o := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 10.0, dag.Name(fmt.Sprintf("spin%d", i)))
		if i%2 == 1 && prev != nil {
			o.With(dag.After(prev))
		}
		prev = o
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(3))
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, b, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTI))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	src0, why, _ := s.TimingSource()
	if src0 != TimingCUPTI {
		requireGPU(t, "CUPTI timing not used: %s", why)
	}
	t.Logf("timing: %s", why)
	se := s.Device().(*Session)
	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, gr.Close()) }()
	require.True(t, gr.TimesReplays())
	gr.Spans() // what the capture left

	const replays = 20
	for batch := range 2 {
		for range replays {
			require.NoError(t, gr.Launch(ctx))
		}
		require.NoError(t, gr.Sync(ctx))
		reps, err := gr.ReplaySpans()
		require.NoError(t, err)
		c := se.tim.cupti
		_, _, dropped := s.TimingSource()
		t.Logf("batch %d: %d replays read; records naming no op %d, replayed records without a marker %d, launches left unmarked %d; "+
			"dropped %d (CUPTI %d, dagrun %d); sink: %v",
			batch, len(reps), c.unnamed, c.unmarked, c.unmarkedLaunches, dropped, c.tr.cuptiDropped(), c.tr.lost(), c.tr.stats())
		for i, r := range reps {
			if i < 3 || i == len(reps)-1 {
				var end time.Duration
				for _, sp := range r.Spans {
					end = max(end, sp.End)
				}
				t.Logf("  replay %d: start %v, makespan %v, %d spans", r.Launch, r.Start, end, len(r.Spans))
			}
		}
		require.Len(t, reps, replays, "every replay of the batch has its spans")
		lastEnd := map[int]time.Duration{} // by stream, on the batch's clock
		for i, r := range reps {
			assert.Equal(t, batch*replays+i+1, r.Launch)
			ops := map[int]int{}
			ends := map[int]time.Duration{}
			for _, sp := range r.Spans {
				ops[sp.Op]++
				assert.Equal(t, int(p.OpStream[sp.Op]), sp.Stream, "replay %d: op %s", r.Launch, graph.Ops[sp.Op].Name)
				assert.LessOrEqual(t, sp.Start, sp.End)
				if i > 0 {
					assert.LessOrEqual(t, lastEnd[sp.Stream], r.Start+sp.Start, "replay %d: op %s starts on stream %d before replay %d ends there",
						r.Launch, graph.Ops[sp.Op].Name, sp.Stream, reps[i-1].Launch)
				}
				ends[sp.Stream] = max(ends[sp.Stream], r.Start+sp.End)
				if graph.Ops[sp.Op].Kind == dag.Launch {
					assert.GreaterOrEqual(t, sp.End-sp.Start, 9*time.Microsecond, "replay %d: op %s", r.Launch, graph.Ops[sp.Op].Name)
				}
			}
			for op := range graph.Ops {
				assert.Equal(t, 1, ops[op], "replay %d: spans of op %s", r.Launch, graph.Ops[op].Name)
			}
			for st, e := range ends {
				lastEnd[st] = e
			}
		}
		assert.Zero(t, dropped, "%v", c.tr.stats())
	}
}

// TestCUPTISessionReplayWhole replays a captured plan of spins 20 times back
// to back with the whole-replay timing source ("cupti-graph") and one Sync:
// ReplaySpans gives 20 replays, each timed whole (no op spans), numbered by
// launch in order, each ending after it starts and before the next one
// starts on the device's clock, and each at least as long as the spins on
// its busiest stream. Eager runs of the same session are timed by events,
// an op span each.
func TestCUPTISessionReplayWhole(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	var prev *dag.Op
	const spin = 10.0 // us
	for i := range 6 {
		o := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), spin, dag.Name(fmt.Sprintf("spin%d", i)))
		if i%2 == 1 && prev != nil {
			o.With(dag.After(prev))
		}
		prev = o
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(3))
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, b, p, executor.WithTiming(), executor.WithTimingSource(TimingCUPTIGraph))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	src, why, _ := s.TimingSource()
	if src != TimingCUPTIGraph {
		requireGPU(t, "whole-replay timing not used: %s: %s", src, why)
	}
	t.Logf("timing: %s", why)
	se := s.Device().(*Session)
	t.Logf("kinds enabled %v", se.tim.cupti.tr.kinds)

	require.NoError(t, s.Run(ctx))
	eager := s.Spans()
	assert.Len(t, eager, len(graph.Ops), "an eager run is timed by events, an op span each: %+v", eager)

	// The busiest stream's spins, one after the other: a replay lasts at
	// least that (less 10% for the spin's own accuracy).
	perStream := map[int]int{}
	for _, op := range graph.Ops {
		perStream[int(p.OpStream[op.ID])]++
	}
	busiest := 0
	for _, n := range perStream {
		busiest = max(busiest, n)
	}
	floor := time.Duration(float64(busiest) * spin * 0.9 * float64(time.Microsecond))

	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, gr.Close()) }()
	require.True(t, gr.TimesReplays())
	gr.Spans() // what the capture left
	const replays = 20
	for batch := range 2 {
		for range replays {
			require.NoError(t, gr.Launch(ctx))
		}
		require.NoError(t, gr.Sync(ctx))
		reps, err := gr.ReplaySpans()
		require.NoError(t, err)
		c := se.tim.cupti
		_, _, dropped := s.TimingSource()
		t.Logf("batch %d: %d replays read; records naming no replay or untimed %d, other records %d, launches left unmarked %d; "+
			"dropped %d; sink: %v", batch, len(reps), c.unmarked, c.unnamed, c.unmarkedLaunches, dropped, c.tr.stats())
		for i, r := range reps {
			if i < 3 || i == len(reps)-1 {
				t.Logf("  replay %d: whole %v, start %v, end %v (%v), %d spans", r.Launch, r.Whole, r.Start, r.End, r.End-r.Start, len(r.Spans))
			}
		}
		require.Len(t, reps, replays, "every replay of the batch has its span")
		for i, r := range reps {
			assert.Equal(t, batch*replays+i+1, r.Launch, "in launch order")
			assert.True(t, r.Whole, "replay %d is timed whole", r.Launch)
			assert.Empty(t, r.Spans, "replay %d", r.Launch)
			assert.Less(t, r.Start, r.End, "replay %d", r.Launch)
			assert.GreaterOrEqual(t, r.End-r.Start, floor, "replay %d: at least its busiest stream's spins", r.Launch)
			if i > 0 {
				assert.LessOrEqual(t, reps[i-1].End, r.Start, "replay %d starts before replay %d ends", r.Launch, reps[i-1].Launch)
			}
		}
		assert.Zero(t, c.unmarked, "every graph-launch record names its replay and is timed")
		assert.Zero(t, dropped, "%v", c.tr.stats())
	}
}
