package job

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

func TestGraphMode(t *testing.T) {
	for src, want := range map[string]executor.GraphMode{
		"":                    executor.GraphAuto,
		"run: {graph: true}":  executor.GraphAlways,
		"run: {graph: false}": executor.GraphNever,
	} {
		s, err := spec.Parse("g.yaml", []byte(src+"\nbuffers:\n  d: {size: 64}\nops:\n  - {fill: {buffer: d, value: 0}}\n"))
		require.NoError(t, err, src)
		assert.Equal(t, want, GraphMode(s), src)
	}
}

func TestInterrupted(t *testing.T) {
	assert.Equal(t, "interrupted before the runs started; everything was freed", (&RunError{}).Interrupted())
	assert.Equal(t, "interrupted after 0 of 1 run completed; the one in flight was abandoned and everything was freed",
		(&RunError{Repeat: 1}).Interrupted())
	assert.Equal(t, "interrupted after 3 of 10 runs completed; the one in flight was abandoned and everything was freed",
		(&RunError{Done: 3, Repeat: 10}).Interrupted())
}

// A traced run keeps its runs for a trace, whose summary leaves out the
// plan's estimate and the comparison with it on the CPU backend without a
// perf model (the default costs are a GPU's).
func TestRunTraced(t *testing.T) {
	s, err := spec.Parse("t.yaml", []byte(`buffers:
  x: {dtype: f32, count: 1024, init: {value: 1}}
  h: {dtype: f32, count: 1024, placement: pinned}
ops:
  - {launch: scale, args: {x: x, alpha: 2}}
  - copy: {from: x, to: h}
outputs: [h]
`))
	require.NoError(t, err)
	p, err := Plan(s, Layout{}.PlanOptions(s)...)
	require.NoError(t, err)
	b := cpu.New()
	defer b.Close()
	r, err := Run(t.Context(), b, &Program{Spec: s, Plan: p}, Config{Backend: "cpu", Repeat: 3, Traced: func(run int) bool { return run > 1 }})
	require.NoError(t, err)
	r.Wait()
	assert.Equal(t, []int{2, 3}, r.TracedRuns)
	assert.Nil(t, r.Planned)
	tr := r.Trace()
	assert.Equal(t, "timers", tr.Figures.Timing)
	var sum strings.Builder
	require.NoError(t, r.WriteTraceSummary(&sum, tr, true))
	assert.Contains(t, sum.String(), "makespan ")
	assert.NotContains(t, sum.String(), "plan estimate")
	assert.Equal(t, "ops timed by timers (the backend times ops with its own clock)", r.Timing.Note())
}

// A world replayed under GraphAlways reports its replays apart from the
// first, eager run and the capture, as BenchmarkTPMLP times a WorldGraph:
// the report gives no time per run, which would spread those over the
// replays, but a line with a replay's time.
func TestRunWorldReplays(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	dir := t.TempDir()
	var ps []*Program
	for r := range 2 {
		s, err := spec.Load("../examples/ranks/tp_mlp.yaml", spec.WithRank(r, 2), spec.WithSaveDir(dir), spec.WithParam("S", 2))
		require.NoError(t, err)
		p := NewRank(s, r, nil, func(string) string { return "" })
		p.Plan, err = Plan(s, Layout{}.PlanOptions(s)...)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	rep, err := RunWorld(t.Context(), b, ps, Config{Backend: "cpu", Repeat: 5, Graph: executor.GraphAlways, World: 2})
	require.NoError(t, err)
	require.NotNil(t, rep.Replays)
	assert.Equal(t, 4, rep.Replays.Replays, "the first run is eager")
	assert.Positive(t, rep.Replays.PerReplayNS)
	assert.LessOrEqual(t, rep.Replays.ReplayNS, rep.WallNS)
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text, ps))
	assert.Contains(t, text.String(), " per rank, 5 runs (the first eager, then replays of a graph captured after it) in ")
	assert.NotContains(t, text.String(), "each)")
	assert.Regexp(t, `(?m)^graph: captured in .*; 4 replays in .* \(.* each after the first, which took .*; .* per op\)$`, text.String())

	rep, err = RunWorld(t.Context(), b, ps, Config{Backend: "cpu", Repeat: 2, World: 2})
	require.NoError(t, err)
	assert.Nil(t, rep.Replays, "eager runs")
	text.Reset()
	require.NoError(t, rep.WriteText(&text, ps))
	assert.Contains(t, text.String(), " per rank, 2 runs (")
}
