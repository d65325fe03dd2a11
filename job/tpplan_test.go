package job_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// dagrun run --graph plans each rank of examples/ranks/tp_mlp.yaml as
// BenchmarkTPMLP plans its block, for a replay, with the split (S) and the
// SMs left to the collectives (C, run.collective_sms) the spec passes on,
// where the machine is the planner's default (one H200 per rank), so
// that the two time the same work.
func TestTPMLPPlannedAsTheBenchmark(t *testing.T) {
	b := cpu.New()
	defer b.Close()
	const tk, h, world = 8192, 4096, 2
	for _, c := range []struct{ split, leave int }{{1, 0}, {4, 0}, {4, 8}, {2, 16}} {
		name := fmt.Sprintf("S=%d/C=%d", c.split, c.leave)
		s, err := spec.Load("../examples/ranks/tp_mlp.yaml", spec.WithRank(0, world), spec.WithParam("T", tk), spec.WithParam("H", h),
			spec.WithParam("F", 4*h/world), spec.WithParam("S", int64(c.split)), spec.WithParam("C", int64(c.leave)))
		require.NoError(t, err, name)
		p := job.NewRank(s, 0, nil, func(string) string { return "" })
		p.Plan, err = job.Plan(s, job.Layout{}.PlanOptions(s)...) // as dagrun run plans before opening the backend
		require.NoError(t, err, name)
		require.NoError(t, p.Replan(b, job.Layout{}, job.Mode(true), nil), name)
		assert.Equal(t, planner.Replay, p.Plan.Stats.Mode, "%s: planned for a replay", name)

		g, err := dagtest.TPMLP(0, world, tk, h, dagtest.TPShape{Part: dagtest.TPBlock, Chunks: c.split})
		require.NoError(t, err, name)
		want, err := planner.New(g, planner.ForMode(planner.Replay), planner.CollectiveSMs(c.leave))
		require.NoError(t, err, name)
		var got, bench strings.Builder
		require.NoError(t, p.Plan.WriteText(&got))
		require.NoError(t, want.WriteText(&bench))
		assert.Equal(t, bench.String(), got.String(), name)
		if c.split > 1 {
			assert.Len(t, p.Plan.Pieces(), 4, "%s: fc1+act, fc2, reduce and residual cut", name)
		}
	}
}
