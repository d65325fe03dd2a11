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
