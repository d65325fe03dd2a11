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
	x := g.Buffer("x", 1024)
	fill := g.Fill(x.Slice(0, 512), 1)
	for range 3 {
		g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 1.0).After(fill)
	}
	g.Fill(x.Slice(512, 512), 2)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Options{Streams: 2})
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
	x := g.Buffer("x", 1024)
	first := g.Fill(x.Slice(0, 512), 1)
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 20.0).After(first)
	g.Fill(x.Slice(512, 512), 2)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Options{Streams: 2})
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
