//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// chains is workload C or E of BASELINES.md: nchains independent chains
// of length launches of kernel k (spin takes us microseconds), declared
// round by round (breadth first, the order the raw loop launches in) or
// chain by chain. The plan submits by estimated start time, so both orders
// should reach the GPU alike.
func chains(nchains, length int, k *dag.Kernel, us float64, byChain bool) *dag.Graph {
	g := dag.New()
	prev := make([]*dag.Op, nchains)
	add := func(c, i int) {
		var o *dag.Op
		if k == dag.Spin {
			o = g.Launch(k, dag.Grid1(1), dag.Grid1(32), us)
		} else {
			o = g.Launch(k, dag.Grid1(1), dag.Grid1(32))
		}
		o.With(dag.Name(fmt.Sprintf("c%d_%d", c, i)))
		if prev[c] != nil {
			o.With(dag.After(prev[c]))
		}
		prev[c] = o
	}
	if byChain {
		for c := range nchains {
			for i := range length {
				add(c, i)
			}
		}
	} else {
		for i := range length {
			for c := range nchains {
				add(c, i)
			}
		}
	}
	graph, err := g.Build()
	if err != nil {
		panic(err)
	}
	return graph
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// timeIt runs f once and returns how long it took.
func timeIt(b *testing.B, f func() error) time.Duration {
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchChains compares, run by run in one process, the executor running the
// plan of nchains x length launches eagerly on the backend with the raw
// driver loops
// (one C loop, and a Go loop with one cgo call per launch) launching the
// same kernels breadth first on as many streams.
func benchChains(b *testing.B, k *dag.Kernel, us float64, perOp, byChain bool) {
	const nchains, length = 8, 100
	be := gpuBackend(b)
	g := chains(nchains, length, k, us, byChain)
	p, err := planner.New(g, planner.Streams(nchains))
	require.NoError(b, err)
	b.Logf("plan: %d streams, %d waits", len(p.Streams), p.Stats.Waits)
	ctx := context.Background()
	s, err := executor.Open(ctx, be, p)
	require.NoError(b, err)
	defer s.Close()
	raw, err := newRawLoop(be, nchains, p.Streams[0].Priority, k, us)
	require.NoError(b, err)
	defer raw.close()
	eager := func() error { return s.Run(ctx) }
	for range 3 { // warm up
		require.NoError(b, raw.launchesC(length))
		require.NoError(b, eager())
	}
	var tc, tgo, te []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tc = append(tc, timeIt(b, func() error { return raw.launchesC(length) }))
		tgo = append(tgo, timeIt(b, func() error { return raw.launchesGo(length) }))
		te = append(te, timeIt(b, eager))
	}
	b.StopTimer()
	mc, mgo, me := median(tc), median(tgo), median(te)
	if perOp {
		n := float64(nchains * length)
		b.ReportMetric(float64(mc.Nanoseconds())/n/1e3, "raw-c-us/op")
		b.ReportMetric(float64(mgo.Nanoseconds())/n/1e3, "raw-go-us/op")
		b.ReportMetric(float64(me.Nanoseconds())/n/1e3, "eager-us/op")
	} else {
		b.ReportMetric(float64(mc.Microseconds())/1e3, "raw-c-ms")
		b.ReportMetric(float64(mgo.Microseconds())/1e3, "raw-go-ms")
		b.ReportMetric(float64(me.Microseconds())/1e3, "eager-ms")
	}
	b.ReportMetric(float64(me)/float64(mc), "eager/raw-c")
	b.ReportMetric(float64(me)/float64(mgo), "eager/raw-go")
}

// BenchmarkWorkloadE: 8 chains x 100 empty kernels, launch-bound.
func BenchmarkWorkloadE(b *testing.B) { benchChains(b, dag.Empty, 0, true, false) }

// BenchmarkWorkloadC: 8 chains x 100 kernels spinning 10 us (ideal 1.0 ms).
func BenchmarkWorkloadC(b *testing.B) { benchChains(b, dag.Spin, 10, false, false) }

// BenchmarkWorkloadCByChain is workload C declared chain by chain. The plan
// submits by estimated start time, not declaration order, so it should run
// as fast as workload C.
func BenchmarkWorkloadCByChain(b *testing.B) { benchChains(b, dag.Spin, 10, false, true) }

// BenchmarkWorkloadA: host cost per launch, 20,000 empty kernels on one
// stream: the raw C loop, and Backend.Run for each.
func BenchmarkWorkloadA(b *testing.B) {
	const n = 20000
	be := gpuBackend(b)
	g := chains(1, 1, dag.Empty, 0, false)
	ctx := context.Background()
	se := openSession(b, be, g)
	defer se.Close()
	require.NoError(b, se.sub.NewStream(0, dag.Normal))
	raw, err := newRawLoop(be, 1, dag.Normal, dag.Empty, 0)
	require.NoError(b, err)
	defer raw.close()
	op := g.Ops[0]
	run := func() error {
		for range n {
			if err := se.sub.Run(0, op); err != nil {
				return err
			}
		}
		return se.host.Sync(ctx)
	}
	require.NoError(b, raw.launchesC(1000))
	require.NoError(b, run())
	var tc, tr []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tc = append(tc, timeIt(b, func() error { return raw.launchesC(n) }))
		tr = append(tr, timeIt(b, run))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(tc).Nanoseconds())/n/1e3, "raw-c-us/launch")
	b.ReportMetric(float64(median(tr).Nanoseconds())/n/1e3, "run-us/launch")
	b.ReportMetric(float64(median(tr))/float64(median(tc)), "run/raw-c")
}

// BenchmarkWorkloadD: host cost of an event record plus a stream wait.
func BenchmarkWorkloadD(b *testing.B) {
	const n = 20000
	be := gpuBackend(b)
	g := chains(1, 1, dag.Empty, 0, false)
	ctx := context.Background()
	se := openSession(b, be, g)
	defer se.Close()
	require.NoError(b, se.sub.NewStream(0, dag.Normal))
	require.NoError(b, se.sub.NewStream(0, dag.Normal))
	require.NoError(b, se.sub.NewEvent())
	raw, err := newRawLoop(be, 2, dag.Normal, dag.Empty, 0)
	require.NoError(b, err)
	defer raw.close()
	pairs := func() error {
		for range n {
			if err := se.sub.Record(0, 0); err != nil {
				return err
			}
			if err := se.sub.Wait(1, 0); err != nil {
				return err
			}
		}
		return se.host.Sync(ctx)
	}
	require.NoError(b, pairs())
	var tc, tb []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tc = append(tc, timeIt(b, func() error { return raw.recordWaitC(n) }))
		tb = append(tb, timeIt(b, pairs))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(tc).Nanoseconds())/n/1e3, "raw-c-us/pair")
	b.ReportMetric(float64(median(tb).Nanoseconds())/n/1e3, "backend-us/pair")
}

// BenchmarkSubmitDrift asks whether a process's host submission speed is a
// property of the process, which a short probe at its start could measure
// and a perf model could scale by: in one process, the host's submission
// cost per launch of a probe (8 chains of 32 empty kernels), then of
// workloads E and C, then of the probe again, every one timed as a
// --perf-model run is (CUPTI, submission timing; medians over the runs
// after a warm-up). Run it in several processes: on the lent H100 the
// workloads' costs over the probe's spread 0.7-1.8x, so no such probe
// predicts a run (BENCHMARKS.md, host drift).
func BenchmarkSubmitDrift(b *testing.B) {
	be := gpuBackend(b)
	ctx := context.Background()
	submit := func(g *dag.Graph, runs int) time.Duration {
		p, err := planner.New(g, planner.Streams(8))
		require.NoError(b, err)
		s, err := executor.Open(ctx, be, p, executor.WithTiming(), executor.WithTimingSource("cupti"), executor.WithSubmitTiming())
		require.NoError(b, err)
		defer s.Close()
		var costs []time.Duration
		for i := range runs {
			require.NoError(b, s.Run(ctx))
			if c, ok := s.SubmitCosts(); ok && i >= runs/2 {
				costs = append(costs, c.Ops[dag.Launch].Mean())
			}
		}
		require.NotEmpty(b, costs, "no submission costs")
		return median(costs)
	}
	probe := chains(8, 32, dag.Empty, 0, false)
	e, c := chains(8, 100, dag.Empty, 0, false), chains(8, 100, dag.Spin, 10, false)
	var ratiosE, ratiosC []float64
	for range b.N {
		before := submit(probe, 10)
		ce, cc := submit(e, 20), submit(c, 20)
		after := submit(probe, 10)
		ratiosE = append(ratiosE, float64(ce)/float64(before))
		ratiosC = append(ratiosC, float64(cc)/float64(before))
		b.Logf("per launch: probe %v, E %v, C %v, probe again %v", before, ce, cc, after)
	}
	// Within the process too: the ratios' range over the iterations.
	b.ReportMetric(slices.Min(ratiosE), "E/probe-min")
	b.ReportMetric(slices.Max(ratiosE), "E/probe-max")
	b.ReportMetric(slices.Min(ratiosC), "C/probe-min")
	b.ReportMetric(slices.Max(ratiosC), "C/probe-max")
}
