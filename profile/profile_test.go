package profile

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/spec"
)

// fanOut plans examples/fan_out.yaml with cost.
func fanOut(t *testing.T, cost perf.CostModel) *planner.Plan {
	t.Helper()
	s, err := spec.Load(filepath.Join("..", "examples", "fan_out.yaml"))
	require.NoError(t, err)
	p, err := planner.New(s.Graph, planner.Cost(cost))
	require.NoError(t, err)
	return p
}

// A profiled run teaches the model the fixed cost of a run's start: what
// the measured makespan has beyond the model's estimate of the plan, eager
// and replayed. Under the taught model the replay's estimate is the
// measured time per replay.
func TestLearnStarts(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	path := filepath.Join(t.TempDir(), "models.json")
	l, err := Load(path, perf.DeviceKey{Name: "cpu"})
	require.NoError(t, err)
	p := fanOut(t, l.Model)
	l.Planned(p)
	ctx := context.Background()
	sess, err := executor.Open(ctx, b, p, executor.WithTiming())
	require.NoError(t, err)
	const repeat = 4
	for run := 1; run <= repeat; run++ {
		require.NoError(t, sess.Run(ctx))
		require.NoError(t, l.Observe(p.Graph, sess.Spans(), run, repeat))
	}
	require.NoError(t, sess.Close())
	assert.Empty(t, l.Eager(), "traced runs teach no host costs")
	assert.Empty(t, l.overheads)

	sess, err = executor.Open(ctx, b, p, executor.WithSubmitTiming())
	require.NoError(t, err)
	require.NoError(t, Untraced(ctx, repeat, sess.Run, func(wall time.Duration, n int) { l.ObserveHost(sess, wall, n, repeat) }))
	require.NoError(t, sess.Close())
	require.Len(t, l.Eager(), repeat-Warmups(repeat), "the first half of the untraced runs warms up")
	assert.NotEmpty(t, l.overheads[perf.SubmitOverhead(dag.Launch)], "the untraced runs teach the host's submission")
	r := Compare(p, l.Model, 0, l.Eager())
	require.NotNil(t, r)
	assert.Equal(t, "eager", r.Mode)
	assert.Positive(t, r.MeasuredNS)

	// A replay measured 50 us over the model's estimate without a start.
	_, err = l.Save() // the op costs first
	require.NoError(t, err)
	l.eager = nil
	o := l.Model.Overheads()
	o.ReplayStart = 0
	est := perf.Simulate(p, perf.WithOverheads(l.Model, o), planner.Replay).Makespan
	measured := est + 50*time.Microsecond
	l.ObserveReplay(measured)
	_, err = l.Save()
	require.NoError(t, err)

	back, err := perf.LoadPerfModel(path, l.Model.Device, nil)
	require.NoError(t, err)
	start, ok := back.Overhead(perf.OverheadStart)
	require.True(t, ok, "an eager run's start was learned")
	assert.GreaterOrEqual(t, start, time.Duration(0))
	replayStart, ok := back.Overhead(perf.OverheadReplayStart)
	require.True(t, ok, "a replay's start was learned")
	assert.InDelta(t, float64(50*time.Microsecond), float64(replayStart), float64(time.Microsecond))
	got := perf.Simulate(p, back, planner.Replay).Makespan
	assert.InDelta(t, float64(measured), float64(got), float64(measured)/100, "the replay's estimate is the measured time")
}

// A file that cannot be used is no error: the learner says why, plans
// with default costs and leaves the file alone.
func TestLoadUnusable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.json")
	require.NoError(t, perf.NewPerfModel(perf.DeviceKey{Name: "another"}, nil).Save(path))
	l, err := Load(path, perf.DeviceKey{Name: "cpu"})
	require.NoError(t, err)
	require.Error(t, l.Unusable)
	l.ObserveReplay(time.Millisecond)
	u, err := l.Save()
	require.NoError(t, err)
	assert.False(t, u.Updated)
}

// In a model that several specs teach, a short run's start counts fully
// and a long run's unexplained time (mostly the drift of its per-op costs)
// hardly at all: a 2 ms residual of an 800-op workload does not become
// every example's fixed start.
func TestStartWeight(t *testing.T) {
	assert.Equal(t, 1.0, startWeight(0))
	assert.Equal(t, 0.5, startWeight(startNoise))
	assert.InDelta(t, 1.0/901, startWeight(3*time.Millisecond), 1e-9)
	for est := time.Duration(0); est < 10*time.Millisecond; est += 37 * time.Microsecond {
		assert.Greater(t, startWeight(est), startWeight(est+time.Microsecond), "est %v", est)
	}

	m := perf.NewPerfModel(perf.DeviceKey{Name: "cpu"}, nil)
	for _, run := range []struct{ est, residual time.Duration }{
		{80 * time.Microsecond, 20 * time.Microsecond},    // a small example
		{3 * time.Millisecond, 2 * time.Millisecond},      // workload C in a slow process
		{120 * time.Microsecond, 24 * time.Microsecond},   // another small one
		{3500 * time.Microsecond, 300 * time.Microsecond}, // workload E
	} {
		require.NoError(t, m.ObserveOverheadWeighted(perf.OverheadStart, run.residual, startWeight(run.est)))
	}
	start, ok := m.Overhead(perf.OverheadStart)
	require.True(t, ok)
	assert.Less(t, start, 25*time.Microsecond, "the small examples' starts, not a mean with the workloads' drift (%v)", start)
	assert.Greater(t, start, 20*time.Microsecond)
}

func TestWarmups(t *testing.T) {
	for _, tc := range []struct{ repeat, want int }{{0, 0}, {1, 0}, {2, 1}, {3, 1}, {4, 2}, {20, 10}, {21, 10}} {
		assert.Equal(t, tc.want, Warmups(tc.repeat), "repeat %d", tc.repeat)
	}
}

// An eager estimate is host-bound where the model's measured submission
// costs, not the ops, set it; with the host unmeasured it says nothing.
func TestCompareHostBound(t *testing.T) {
	runs := []time.Duration{time.Millisecond}
	for _, tc := range []struct {
		name      string
		submit    time.Duration // per op of every kind; 0: not measured
		hostBound bool
	}{
		{"host unmeasured", 0, false},
		{"slow host", 50 * time.Microsecond, true},
		{"fast host", time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := perf.NewPerfModel(perf.DeviceKey{Name: "cpu"}, nil)
			if tc.submit > 0 {
				for _, op := range fanOut(t, nil).Graph.Ops {
					require.NoError(t, m.ObserveOverhead(perf.SubmitOverhead(op.Kind), tc.submit))
				}
			}
			p := fanOut(t, m)
			r := Compare(p, m, 0, runs)
			require.NotNil(t, r)
			assert.Equal(t, tc.hostBound, r.HostBound)
			if tc.submit > 0 {
				assert.Positive(t, r.DeviceNS)
				assert.Less(t, r.DeviceNS, r.EstimatedNS+1)
			}
		})
	}
	p := fanOut(t, nil)
	assert.Nil(t, Compare(p, nil, 0, nil), "nothing measured")
	assert.Equal(t, "time per replay launched back to back, after the warm-up", Compare(p, nil, time.Millisecond, nil).Source)
}

// A makespan, an update and a learner's coverage each say themselves in
// a line; a host-bound makespan adds one.
func TestLines(t *testing.T) {
	m := Makespan{Mode: "eager", EstimatedNS: 2e6, MeasuredNS: 1e6, Ratio: 2, Source: "mean wall time"}
	assert.Equal(t, "makespan (eager): estimated 2.00 ms, measured 1.00 ms (estimate/measured 2.00; measured: mean wall time)", m.String())
	m.MeasuredQ1NS, m.MeasuredMedianNS, m.MeasuredQ3NS, m.HostBound, m.DeviceNS = 1e6, 1e6, 1e6, true, 5e5
	assert.Regexp(t, `; quartiles 1.00 ms, 1.00 ms, 1.00 ms\)\n  host-bound: the device's own work is 500 .s of the estimate;`, m.String())
	assert.Equal(t, "perf model m.json updated from 3 op samples", Update{Path: "m.json", Updated: true, Samples: 3}.String())
	assert.Equal(t, "perf model m.json not updated", Update{Path: "m.json"}.String())
	l := &Learner{Path: "m.json", Covered: 2, Ops: 5}
	assert.Equal(t, "perf model m.json: 2 of 5 ops costed from measurements", l.Coverage())
}
