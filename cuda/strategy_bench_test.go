//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// spins declares independent spin kernels of the given microseconds, in
// that order, each with its cost, so the planner's estimate is the GPU's.
func spins(us ...float64) *dag.Graph {
	g := dag.New()
	for i, u := range us {
		g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), u, dag.Name(fmt.Sprintf("k%d", i))).Cost =
			time.Duration(u * float64(time.Microsecond))
	}
	graph, err := g.Build()
	if err != nil {
		panic(err)
	}
	return graph
}

// forkJoin declares a fork of width branches of spin kernels whose costs
// differ tenfold, joined by one kernel, declared cheapest branch first.
func forkJoin(width int) *dag.Graph {
	g := dag.New()
	fork := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 5.0, dag.Name("fork"))
	var ends []*dag.Op
	for b := range width {
		us := 10 + 90*float64(b)/float64(width-1)
		prev := fork
		for i := range 3 {
			o := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), us, dag.Name(fmt.Sprintf("b%d_%d", b, i)), dag.After(prev))
			prev = o
		}
		ends = append(ends, prev)
	}
	g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 5.0, dag.Name("join"), dag.After(ends...))
	graph, err := g.Build()
	if err != nil {
		panic(err)
	}
	return graph
}

// BenchmarkStrategies runs the plans of list scheduling (the default) and
// of placement in declaration order (the old strategy) of the same graphs
// side by side on the GPU, run by run, eagerly and replayed: the measured
// makespans (medians) and their ratio, and the list plan's estimate over
// its measured makespan (no regression beyond noise, and the
// estimate against the measurement).
func BenchmarkStrategies(b *testing.B) {
	be := gpuBackend(b)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		g       *dag.Graph
		streams int
	}{
		{"C", chains(8, 100, dag.Spin, 10, false), 8},
		{"C-by-chain", chains(8, 100, dag.Spin, 10, true), 8},
		{"independent-shortest-first", spins(39, 52, 88, 120, 160, 250, 379), 2},
		{"fork-join-x8-on-4", forkJoin(8), 4},
	} {
		b.Run(c.name, func(b *testing.B) {
			type variant struct {
				s     *executor.Session
				g     *executor.Graph
				p     *planner.Plan
				eager []time.Duration
				rep   []time.Duration
			}
			var vs []*variant
			for _, st := range []planner.Strategy{planner.ListScheduling, planner.DeclarationOrder} {
				p, err := planner.New(c.g, planner.Streams(c.streams), planner.OrderBy(st))
				require.NoError(b, err)
				s, err := executor.Open(ctx, be, p)
				require.NoError(b, err)
				b.Cleanup(func() { s.Close() })
				g, err := s.Capture(ctx)
				require.NoError(b, err)
				b.Cleanup(func() { g.Close() })
				vs = append(vs, &variant{s: s, g: g, p: p})
			}
			for _, v := range vs { // warm up
				require.NoError(b, v.s.Run(ctx))
				require.NoError(b, v.g.Run(ctx))
			}
			b.ResetTimer()
			for range b.N {
				for _, v := range vs {
					v.eager = append(v.eager, timeIt(b, func() error { return v.s.Run(ctx) }))
					v.rep = append(v.rep, timeIt(b, func() error { return v.g.Run(ctx) }))
				}
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			list, old := vs[0], vs[1]
			b.ReportMetric(ms(median(list.eager)), "list-eager-ms")
			b.ReportMetric(ms(median(old.eager)), "declared-eager-ms")
			b.ReportMetric(ms(median(list.rep)), "list-replay-ms")
			b.ReportMetric(ms(median(old.rep)), "declared-replay-ms")
			b.ReportMetric(float64(median(list.eager))/float64(median(old.eager)), "eager-list/declared")
			b.ReportMetric(float64(median(list.rep))/float64(median(old.rep)), "replay-list/declared")
			eagerEst := perf.Simulate(list.p, nil, planner.Eager).Makespan
			replayEst := perf.Simulate(list.p, nil, planner.Replay).Makespan
			b.ReportMetric(float64(eagerEst)/float64(median(list.eager)), "eager-est/measured")
			b.ReportMetric(float64(replayEst)/float64(median(list.rep)), "replay-est/measured")
			b.Logf("list: %d streams, %d waits, placed by %s; declared: %d streams, %d waits",
				list.p.Stats.Streams, list.p.Stats.Waits, list.p.Stats.Strategy, old.p.Stats.Streams, old.p.Stats.Waits)
		})
	}
}
