package executor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
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

// traceRuns chooses the runs in list.
func traceRuns(list ...int) func(int) bool {
	return func(run int) bool { return slices.Contains(list, run) }
}

// everyRun chooses every run.
func everyRun(int) bool { return true }

// Replays traced on a backend that times replays launched back to back
// (the cpu backend) are batched like the others and come back as the runs
// chosen, each with every op's span once, placed after the replay before it
// on each stream; with timing off, traced replays run alone and are timed
// whole by the host's clock; with whole replays asked for, the batched
// replays are kept whole, from their first op's start to their last op's
// end.
func TestRunnerTracesReplays(t *testing.T) {
	g := dag.New()
	x := g.Buffer("x", 1024, dag.Zeros())
	first := g.Fill(x.Slice(0, 512), 1)
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 2.0, dag.After(first))
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 2.0)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(2))
	require.NoError(t, err)
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()

	every150 := []int{1, 2, 50, 51, 52, 150}
	tests := []struct {
		name        string
		noTimer     bool
		traced      []int
		repeat      int
		whole       bool  // WithWholeReplays
		runs        []int // traced with their spans
		wholeRuns   []int // traced whole
		wholeTiming string
	}{
		{"batched", false, every150, 150, false, every150, nil, ""},
		{"all", false, []int{1, 2, 3, 4, 5}, 5, false, []int{1, 2, 3, 4, 5}, nil, ""},
		{"no timer: whole and alone", true, []int{2, 4}, 5, false, nil, []int{2, 4}, executor.WholeOnHost},
		{"whole replays from op spans", false, []int{1, 50, 51, 52}, 60, true, nil, []int{1, 50, 51, 52}, executor.WholeFromOps},
		{"whole replays without a timer", true, []int{3}, 5, true, nil, []int{3}, executor.WholeOnHost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := []executor.Option{executor.WithGraph(executor.GraphAlways), executor.WithTraceRuns(traceRuns(tc.traced...))}
			if !tc.noTimer {
				opts = append(opts, executor.WithTiming())
			}
			if tc.whole {
				opts = append(opts, executor.WithWholeReplays())
			}
			rn, err := executor.NewRunner(ctx, b, p, opts...)
			require.NoError(t, err)
			defer func() { require.NoError(t, rn.Close()) }()
			rep, err := rn.Run(ctx, tc.repeat)
			require.NoError(t, err)
			require.NotNil(t, rep.Replays)
			assert.Equal(t, tc.repeat, rep.Replays.Replays)
			assert.Equal(t, tc.repeat, rep.Runs)
			var spanned []int
			for _, r := range rep.Traced[0] {
				spanned = append(spanned, r.Run)
			}
			assert.Equal(t, tc.runs, spanned)
			assert.Equal(t, slices.Sorted(slices.Values(append(slices.Clone(tc.runs), tc.wholeRuns...))), rep.TracedRuns(),
				"traced runs: op by op and whole")
			var whole []int
			var wholeEnd time.Duration
			for i, w := range rep.Whole {
				whole = append(whole, w.Run)
				// Two spins of 2 us in a row at least, on one stream.
				assert.GreaterOrEqual(t, w.Dur, 2*time.Microsecond, "replay %d", w.Run)
				if i > 0 {
					assert.LessOrEqual(t, wholeEnd, w.Start, "replay %d starts before replay %d ends", w.Run, rep.Whole[i-1].Run)
				}
				wholeEnd = w.Start + w.Dur
			}
			assert.Equal(t, tc.wholeRuns, whole)
			assert.Equal(t, tc.wholeTiming, rep.WholeTiming)
			lastEnd := map[int]time.Duration{} // by stream, on the host's clock
			for i, run := range rep.Traced[0] {
				require.Len(t, run.Spans, len(graph.Ops), "run %d", run.Run)
				seen := map[int]bool{}
				ends := map[int]time.Duration{}
				for _, sp := range run.Spans {
					assert.False(t, seen[sp.Op], "run %d: op %d twice", run.Run, sp.Op)
					seen[sp.Op] = true
					if i > 0 {
						assert.LessOrEqual(t, lastEnd[sp.Stream], run.Start+sp.Start,
							"run %d starts on stream %d before run %d ends", run.Run, sp.Stream, rep.Traced[0][i-1].Run)
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

// Eager, automatic and always: the runs each mode makes compute the same
// result, report which runs were replays, and pass every eager run to the
// observer and every run to the progress function.
func TestRunnerModes(t *testing.T) {
	ctx := context.Background()
	const repeat = 10
	tests := []struct {
		name     string
		mode     executor.GraphMode
		observed int    // eager runs seen by the observer
		log      string // RunLog
		replays  int    // the graph's launches; 0: no graph
	}{
		{"never", executor.GraphNever, repeat, "", 0},
		{"auto", executor.GraphAuto, executor.DefaultAutoCapture, "runs 1-3 eager, 4-10 replayed (captured automatically after 3 identical eager runs)", 7},
		{"always", executor.GraphAlways, 0, "", repeat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := cpu.New()
			defer b.Close()
			p, x := tripling(t)
			var observed, progressed []int
			rn, err := executor.NewRunner(ctx, b, p, executor.WithGraph(tt.mode), executor.WithTiming(),
				executor.WithTraceRuns(everyRun),
				executor.WithObserver(func(o executor.Observation) error {
					observed = append(observed, o.Run)
					assert.NotEmpty(t, o.Spans, "run %d", o.Run)
					return nil
				}),
				executor.WithProgress(func(done int) { progressed = append(progressed, done) }))
			require.NoError(t, err)
			defer rn.Close()
			rep, err := rn.Run(ctx, repeat)
			require.NoError(t, err)
			assert.Equal(t, repeat, rep.Runs)
			assert.Len(t, observed, tt.observed)
			require.NotEmpty(t, progressed)
			assert.Equal(t, repeat, progressed[len(progressed)-1])
			assert.True(t, slices.IsSorted(progressed))
			if tt.log != "" {
				assert.Equal(t, tt.log, rep.Log.String())
			}
			if tt.replays == 0 {
				assert.Nil(t, rep.Replays)
			} else {
				require.NotNil(t, rep.Replays)
				assert.Equal(t, tt.replays, rep.Replays.Replays)
				assert.Positive(t, rep.Replays.PerReplay)
			}
			assert.Equal(t, slices.Collect(func(yield func(int) bool) {
				for i := 1; i <= repeat; i++ {
					if !yield(i) {
						return
					}
				}
			}), rep.TracedRuns(), "every run traced, eager or replayed")
			data, err := rn.Session(0).Read(x)
			require.NoError(t, err)
			assert.Equal(t, f32bytes(59049), data, "3^10")
		})
	}
}

// A Runner's context ending mid-run stops it with a report of the runs
// that completed.
func TestRunnerInterrupted(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rn, err := executor.NewRunner(ctx, b, spinPlan(t, 4, 2_000), executor.WithObserver(func(o executor.Observation) error {
		if o.Run == 3 {
			cancel()
		}
		return nil
	}))
	require.NoError(t, err)
	defer rn.Close()
	rep, err := rn.Run(ctx, 100)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 3, rep.Runs)
	assert.Equal(t, 100, rep.Repeat)
	assert.Positive(t, rep.Wall)
}

// An observer's error stops the runs and says which run it observed.
func TestRunnerObserverFails(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	bad := errors.New("no room")
	rn, err := executor.NewRunner(context.Background(), b, spinPlan(t, 1, 1), executor.WithObserver(func(o executor.Observation) error {
		if o.Run == 2 {
			return bad
		}
		return nil
	}))
	require.NoError(t, err)
	defer rn.Close()
	rep, err := rn.Run(context.Background(), 5)
	require.ErrorIs(t, err, bad)
	assert.Contains(t, err.Error(), "run 2")
	assert.Equal(t, 2, rep.Runs)
}

// Ranks under GraphAlways run their first run eagerly and replay a graph
// captured after it; every rank's runs are traced, and the result is the
// eager one's.
func TestRunnerRanksCaptureAfterTheFirstRun(t *testing.T) {
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	p0, x0 := tripling(t)
	p1, x1 := tripling(t)
	rn, err := executor.NewWorldRunner(ctx, b, []*planner.Plan{p0, p1}, executor.WithGraph(executor.GraphAlways),
		executor.WithTiming(), executor.WithTraceRuns(everyRun))
	require.NoError(t, err)
	rep, err := rn.Run(ctx, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Runs)
	require.Equal(t, 2, rn.Sessions())
	for i, x := range []*dag.Buffer{x0, x1} {
		assert.Len(t, rep.Traced[i], 4, "rank %d", i)
		data, err := rn.Session(i).Read(x)
		require.NoError(t, err)
		assert.Equal(t, f32bytes(81), data, "rank %d: 3^4", i)
	}
	assert.False(t, rn.Opened().IsZero())
	require.NoError(t, rn.Close())
	require.NoError(t, rn.Close(), "closing twice is harmless")
	_, err = rn.Run(ctx, 1)
	assert.ErrorIs(t, err, executor.ErrClosed)
}

// tripling is a plan that triples x, 4 bytes of f32 1, at each run.
func tripling(t *testing.T) (*planner.Plan, *dag.Buffer) {
	t.Helper()
	b := dag.New()
	x := b.Buffer("x", 4, dag.Value(1))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 3.0)
	g, err := b.Build()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	return p, x
}

// f32bytes is v as the 4 bytes of an f32.
func f32bytes(v float32) []byte {
	return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))
}

// Ranks stay eager under GraphAuto: no rank captures on its own.
func TestRunnerRanksStayEagerUnderAuto(t *testing.T) {
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	p0, x0 := tripling(t)
	p1, _ := tripling(t)
	rn, err := executor.NewWorldRunner(ctx, b, []*planner.Plan{p0, p1}, executor.WithGraph(executor.GraphAuto))
	require.NoError(t, err)
	defer rn.Close()
	rep, err := rn.Run(ctx, 2*executor.DefaultAutoCapture)
	require.NoError(t, err)
	assert.Nil(t, rep.Replays)
	for i := range rn.Sessions() {
		assert.Nil(t, rn.Session(i).AutoGraph(), "rank %d captured", i)
		assert.Zero(t, rn.Session(i).RunLog().CapturedAfter, "rank %d", i)
	}
	data, err := rn.Session(0).Read(x0)
	require.NoError(t, err)
	assert.Equal(t, f32bytes(729), data, "3^6")
}

// Replays stopped by their context report the replays that completed, in
// every replay loop: batched, batched and traced, and traced alone.
func TestRunnerReplaysInterrupted(t *testing.T) {
	tests := []struct {
		name string
		opts []executor.Option
	}{
		{"batched", nil},
		{"traced in batches", []executor.Option{executor.WithTiming(), executor.WithTraceRuns(everyRun)}},
		{"traced alone", []executor.Option{executor.WithTraceRuns(traceRuns(2, 3))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := cpu.New()
			defer b.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopAt := 0
			opts := append([]executor.Option{executor.WithGraph(executor.GraphAlways), executor.WithProgress(func(done int) {
				if done >= 2 && stopAt == 0 {
					stopAt = done
					cancel()
				}
			})}, tt.opts...)
			p, _ := tripling(t)
			rn, err := executor.NewRunner(ctx, b, p, opts...)
			require.NoError(t, err)
			defer rn.Close()
			rep, err := rn.Run(ctx, 1000)
			require.ErrorIs(t, err, context.Canceled)
			require.NotZero(t, stopAt)
			assert.Equal(t, stopAt, rep.Runs, "the runs done when the context ended")
			assert.Less(t, rep.Runs, 1000)
		})
	}
}

// Every mode parses back from its name, and nothing else parses.
func TestGraphModeNames(t *testing.T) {
	for _, m := range []executor.GraphMode{executor.GraphNever, executor.GraphAuto, executor.GraphAlways} {
		got, ok := executor.ParseGraphMode(m.String())
		require.True(t, ok, "%v", m)
		assert.Equal(t, m, got)
	}
	_, ok := executor.ParseGraphMode("sometimes")
	assert.False(t, ok)
	assert.Equal(t, "GraphMode(9)", executor.GraphMode(9).String())
}
