package main

import (
	"context"
	"io"
	"slices"
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
// whole by the host's clock; with whole replays asked for (--trace-detail
// replays), the batched replays are kept whole, from their first op's start
// to their last op's end.
func TestReplayTraced(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 1024, dag.Zeros())
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
		name        string
		timing      bool
		k           string
		repeat      int
		whole       bool  // --trace-detail replays
		runs        []int // traced with their spans
		wholeRuns   []int // traced whole
		wholeTiming string
	}{
		{"batched", true, "1,2,50-52,150", 150, false, []int{1, 2, 50, 51, 52, 150}, nil, ""},
		{"all", true, "all", 5, false, []int{1, 2, 3, 4, 5}, nil, ""},
		{"no timer: whole and alone", false, "2,4", 5, false, nil, []int{2, 4}, wholeOnHost},
		{"whole replays from op spans", true, "1,50-52", 60, true, nil, []int{1, 50, 51, 52}, wholeFromOps},
		{"whole replays without a timer", false, "3", 5, true, nil, []int{3}, wholeOnHost},
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
			rs := &runState{repeat: tc.repeat, graph: true, traced: traced, bar: c.newProgress(tc.repeat, true), traceReplays: true,
				wholeReplays: tc.whole}
			r, err := replayTraced(ctx, sess, rs, len(graph.Ops))
			require.NoError(t, err)
			assert.Equal(t, tc.repeat, r.Replays)
			var spanned []int
			for _, r := range rs.runs {
				spanned = append(spanned, r.Run)
			}
			assert.Equal(t, tc.runs, spanned)
			assert.Equal(t, slices.Sorted(slices.Values(append(slices.Clone(tc.runs), tc.wholeRuns...))), rs.tracedRuns(),
				"traced runs: op by op and whole")
			var whole []int
			var wholeEnd time.Duration
			for i, w := range rs.whole {
				whole = append(whole, w.Run)
				// Two spins of 2 us in a row at least, on one stream.
				assert.GreaterOrEqual(t, w.Dur, 2*time.Microsecond, "replay %d", w.Run)
				if i > 0 {
					assert.LessOrEqual(t, wholeEnd, w.Start, "replay %d starts before replay %d ends", w.Run, rs.whole[i-1].Run)
				}
				wholeEnd = w.Start + w.Dur
			}
			assert.Equal(t, tc.wholeRuns, whole)
			assert.Equal(t, tc.wholeTiming, rs.wholeTiming)
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
