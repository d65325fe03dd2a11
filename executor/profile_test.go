package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestSubmitCosts: a session opened WithSubmitTiming counts and times every
// submission step of the last run, by kind, and says how its ops are timed.
func TestSubmitCosts(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 1024, dag.Zeros())
	fill := g.Fill(x.Slice(0, 512), 1)
	for range 3 {
		g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 1.0, dag.After(fill))
	}
	g.Fill(x.Slice(512, 512), 2)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(2))
	require.NoError(t, err)
	b := cpu.New()
	defer b.Close()

	plain, err := executor.Open(context.Background(), b, p)
	require.NoError(t, err)
	_, ok := plain.SubmitCosts()
	assert.False(t, ok)
	src, _, _ := plain.TimingSource()
	assert.Empty(t, src, "timing is off")
	require.NoError(t, plain.Close())

	s, err := executor.Open(context.Background(), b, p, executor.WithTiming(), executor.WithSubmitTiming(),
		executor.WithTimingSource("auto"))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	for range 2 { // counts are of the last run only
		require.NoError(t, s.Run(context.Background()))
	}
	c, ok := s.SubmitCosts()
	require.True(t, ok)
	assert.Equal(t, 3, c.Ops[dag.Launch].Count)
	assert.Equal(t, 2, c.Ops[dag.Fill].Count)
	waits, records := 0, 0
	for _, st := range p.Steps {
		switch st.Kind {
		case planner.Wait:
			waits++
		case planner.Record:
			records++
		}
	}
	assert.Equal(t, waits, c.Waits.Count)
	assert.Equal(t, records, c.Records.Count)
	assert.Positive(t, c.Ops[dag.Launch].Total)
	assert.Equal(t, c.Ops[dag.Launch].Total/3, c.Ops[dag.Launch].Mean())
	src, why, dropped := s.TimingSource()
	assert.Equal(t, "timers", src)
	assert.NotEmpty(t, why)
	assert.Zero(t, dropped)
}

// TestGraphSpans: on the cpu backend, each replay of a captured graph has
// the spans of all its ops, read after its Sync.
func TestGraphSpans(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 1024, dag.Zeros())
	first := g.Fill(x.Slice(0, 512), 1)
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 20.0, dag.After(first))
	g.Fill(x.Slice(512, 512), 2)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(2))
	require.NoError(t, err)
	b := cpu.New()
	defer b.Close()
	s, err := executor.Open(context.Background(), b, p, executor.WithTiming())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	gr, err := s.Capture(context.Background())
	require.NoError(t, err)
	defer func() { require.NoError(t, gr.Close()) }()
	gr.Spans() // whatever capturing left
	for range 3 {
		require.NoError(t, gr.Run(context.Background()))
		spans := gr.Spans()
		require.Len(t, spans, len(graph.Ops))
		for _, sp := range spans {
			assert.LessOrEqual(t, sp.Start, sp.End)
			if graph.Ops[sp.Op].Kind == dag.Launch {
				assert.GreaterOrEqual(t, sp.End-sp.Start, 20*time.Microsecond)
			}
		}
	}
}

// TestGraphReplaySpans: on the cpu backend, replays launched back to back
// and synchronised once have their spans told apart, numbered by the
// graph's launches: every op once per replay, on its plan stream, and on
// each stream a replay's ops end before the next replay's begin. Another
// graph's replays in the same batch are not this graph's.
func TestGraphReplaySpans(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 1024, dag.Zeros())
	first := g.Fill(x.Slice(0, 512), 1)
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 5.0, dag.After(first))
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 5.0)
	g.Fill(x.Slice(512, 512), 2)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(2))
	require.NoError(t, err)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()

	untimed, err := executor.Open(ctx, b, p)
	require.NoError(t, err)
	ug, err := untimed.Capture(ctx)
	require.NoError(t, err)
	assert.False(t, ug.TimesReplays(), "without WithTiming")
	require.NoError(t, ug.Run(ctx))
	reps, err := ug.ReplaySpans()
	require.NoError(t, err)
	assert.Empty(t, reps)
	require.NoError(t, untimed.Close())

	s, err := executor.Open(ctx, b, p, executor.WithTiming())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	ga, err := s.Capture(ctx)
	require.NoError(t, err)
	gb, err := s.Capture(ctx)
	require.NoError(t, err)
	require.True(t, ga.TimesReplays())
	ga.Spans() // whatever capturing left

	tests := []struct {
		name     string
		launches []*executor.Graph // in launch order, then one Sync
		want     []int             // ga's launch numbers read back
	}{
		{"one batch", []*executor.Graph{ga, ga, ga, ga, ga, ga}, []int{1, 2, 3, 4, 5, 6}},
		{"numbers go on", []*executor.Graph{ga, ga, ga}, []int{7, 8, 9}},
		{"another graph between", []*executor.Graph{ga, gb, gb, ga, ga, gb}, []int{10, 11, 12}},
		{"only the other graph", []*executor.Graph{gb}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, gr := range tc.launches {
				require.NoError(t, gr.Launch(ctx))
			}
			require.NoError(t, ga.Sync(ctx))
			reps, err := ga.ReplaySpans()
			require.NoError(t, err)
			var got []int
			for _, r := range reps {
				got = append(got, r.Launch)
			}
			require.Equal(t, tc.want, got)
			lastEnd := map[int]time.Duration{} // by stream: the previous replay's last end, on the batch's clock
			for i, r := range reps {
				require.Len(t, r.Spans, len(graph.Ops), "replay %d: every op once: %+v", r.Launch, r.Spans)
				seen := map[int]bool{}
				firstStart := map[int]time.Duration{}
				ends := map[int]time.Duration{}
				for _, sp := range r.Spans {
					assert.False(t, seen[sp.Op], "replay %d: op %d twice", r.Launch, sp.Op)
					seen[sp.Op] = true
					assert.Equal(t, int(p.OpStream[sp.Op]), sp.Stream, "op %d", sp.Op)
					assert.GreaterOrEqual(t, sp.Start, time.Duration(0), "spans are measured from the replay's start")
					assert.LessOrEqual(t, sp.Start, sp.End)
					start, end := r.Start+sp.Start, r.Start+sp.End
					if f, ok := firstStart[sp.Stream]; !ok || start < f {
						firstStart[sp.Stream] = start
					}
					ends[sp.Stream] = max(ends[sp.Stream], end)
				}
				for st, f := range firstStart {
					if i > 0 {
						assert.LessOrEqual(t, lastEnd[st], f, "stream %d: replay %d starts before replay %d ends", st, r.Launch, reps[i-1].Launch)
					}
				}
				for st, e := range ends {
					lastEnd[st] = e
				}
			}
			other, err := gb.ReplaySpans()
			require.NoError(t, err)
			assert.Empty(t, other, "ga's read took the batch's spans; gb's replays were dropped")
		})
	}
}
