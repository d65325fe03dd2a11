package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestReplayTraced: replays traced on a backend that times replays
// launched back to back (the cpu backend) are batched like the others and
// come back as the runs --trace-runs chose, each with every op's span once,
// placed after the replay before it on each stream; with timing off on a
// graph the backend cannot time, traced replays run alone and are timed
// whole.
func TestReplayTraced(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 1024)
	first := g.Fill(x.Slice(0, 512), 1)
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 2.0).After(first)
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 2.0)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Options{Streams: 2})
	require.NoError(t, err)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	c := &cli{stdout: io.Discard, stderr: io.Discard, terminal: terminal(false)}

	tests := []struct {
		name   string
		timing bool
		k      string
		repeat int
		runs   []int // traced with their spans
		whole  []int // traced whole
	}{
		{"batched", true, "1,2,50-52,150", 150, []int{1, 2, 50, 51, 52, 150}, nil},
		{"all", true, "all", 5, []int{1, 2, 3, 4, 5}, nil},
		{"no timer: whole and alone", false, "2,4", 5, nil, []int{2, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []executor.Option
			if tc.timing {
				opts = append(opts, executor.WithTiming())
			}
			sess, err := executor.Open(ctx, b, p, opts...)
			require.NoError(t, err)
			defer func() { require.NoError(t, sess.Close()) }()
			traced, err := parseTraceRuns(tc.k, tc.repeat)
			require.NoError(t, err)
			rs := &runState{repeat: tc.repeat, graph: true, traced: traced, bar: c.newProgress(tc.repeat, true), traceReplays: true}
			r, err := replayTraced(ctx, sess, rs, len(graph.Ops))
			require.NoError(t, err)
			assert.Equal(t, tc.repeat, r.Replays)
			assert.Equal(t, tc.runs, rs.tracedRuns())
			var whole []int
			for _, w := range rs.whole {
				whole = append(whole, w.Run)
				assert.Positive(t, w.Wall)
			}
			assert.Equal(t, tc.whole, whole)
			lastEnd := map[int]time.Duration{} // by stream, on the host's clock
			for i, run := range rs.runs {
				require.Len(t, run.Spans, len(graph.Ops), "run %d", run.Run)
				seen := map[int]bool{}
				ends := map[int]time.Duration{}
				for _, sp := range run.Spans {
					assert.False(t, seen[sp.Op], "run %d: op %d twice", run.Run, sp.Op)
					seen[sp.Op] = true
					if i > 0 {
						assert.LessOrEqual(t, lastEnd[sp.Stream], run.Start+sp.Start,
							"run %d starts on stream %d before run %d ends", run.Run, sp.Stream, rs.runs[i-1].Run)
					}
					ends[sp.Stream] = max(ends[sp.Stream], run.Start+sp.End)
				}
				for st, e := range ends {
					lastEnd[st] = e
				}
			}
		})
	}
}
