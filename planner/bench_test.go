package planner_test

import (
	"runtime"
	"testing"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// BenchmarkNew plans random DAGs of about 8-wide parallelism onto 8 compute
// streams, for the device alone (no overheads) and for an eager run under
// the default cost model. Besides time and allocations per plan it reports time and bytes
// per op of the graph, the waits inserted against the cross-stream edges,
// and the estimated makespan over the critical-path bound.
func BenchmarkNew(b *testing.B) {
	for _, bc := range []struct {
		name string
		ops  int
		cost perf.CostModel
	}{
		{"ops=1000", 1000, perf.WithOverheads(nil, perf.Overheads{})},
		{"ops=100000", 100000, perf.WithOverheads(nil, perf.Overheads{})},
		{"ops=1000000", 1000000, perf.WithOverheads(nil, perf.Overheads{})},
		// The default cost model and eager overheads: the host's
		// submissions and waits keep the plan more than 1% above the lower
		// bound, so list scheduling tries its other orderings on graphs of
		// up to 16,384 ops (the first of these).
		{"eager/ops=16384", 16384, nil},
		{"eager/ops=100000", 100000, nil},
		{"eager/ops=1000000", 1000000, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g := dagtest.Shape(bc.ops, 8, 1)
			opts := []planner.Option{planner.Streams(8), planner.Cost(bc.cost)}
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.GC() // leave the garbage of building the graph out of the figures
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			var p *planner.Plan
			for b.Loop() {
				var err error
				if p, err = planner.New(g, opts...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			perPlan := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perPlan/float64(len(g.Ops)), "ns/graphop")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(g.Ops)), "B/graphop")
			b.ReportMetric(float64(p.Stats.Waits), "waits")
			b.ReportMetric(float64(p.Stats.CrossEdges), "crossedges")
			b.ReportMetric(float64(p.Stats.Makespan)/float64(p.Stats.CriticalPath), "makespan/cp")
		})
	}
}
