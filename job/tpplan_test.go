package job_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// tpBenchGraph is rank r's block as cuda's BenchmarkTPMLP builds it
// (tpGraph there), which dagrun run's figures of
// examples/ranks/tp_mlp.yaml are set against.
func tpBenchGraph(t *testing.T, r, world int, tk, h int64, chunks int) *dag.Graph {
	t.Helper()
	f := 4 * h / int64(world)
	g := dag.New()
	bf, dev := dag.Of(dag.BF16), dag.OnDevice(r)
	x := g.Buffer("x", 2*tk*h, dev, bf, dag.Random(11))
	w1 := g.Buffer("w1", 2*h*f, dev, bf, dag.Random(uint64(12+100*r)))
	w2 := g.Buffer("w2", 2*f*h, dev, bf, dag.Random(uint64(13+100*r)))
	hid := g.Buffer("h", 2*tk*f, dev, bf, dag.Zeros())
	y := g.Buffer("y", 2*tk*h, dev, bf, dag.Zeros())
	g.Gemm(hid.All(), x.All(), w1.All(), dag.GemmShape{M: tk, N: f, K: h}, dag.Alpha(0.125), dev, dag.Name("fc1"))
	g.Launch(dag.Gelu, dag.Grid1(1024), dag.Threads(256), hid, hid, dev, dag.Name("act"))
	g.Gemm(y.All(), hid.All(), w2.All(), dag.GemmShape{M: tk, N: h, K: f}, dag.Alpha(0.125), dev, dag.Name("fc2"))
	g.AllReduce(y.All(), dag.Sum, dev, dag.Normal, dag.Name("reduce"), dag.SplitInto(chunks))
	g.Launch(dag.Axpy, dag.Grid1(1024), dag.Threads(256), y, x, float32(1), dev, dag.Name("residual"))
	graph, err := g.Build()
	require.NoError(t, err)
	return graph
}

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

		want, err := planner.New(tpBenchGraph(t, 0, world, tk, h, c.split), planner.ForMode(planner.Replay), planner.CollectiveSMs(c.leave))
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
