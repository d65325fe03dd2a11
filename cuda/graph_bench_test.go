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
)

// benchReplay compares, sample by sample in one process, replays of the
// captured plan of workload C or E (nchains x length launches of k) with
// replays of the same work captured directly with the driver (rawGraph):
// each sample launches the graph `back` times back to back and waits.
func benchReplay(b *testing.B, k *dag.Kernel, us float64, back int, perOp bool) {
	const nchains, length = 8, 100
	be := gpuBackend(b)
	g := chains(nchains, length, k, us, false)
	p, err := planner.New(g, planner.Streams(nchains))
	require.NoError(b, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, be, p)
	require.NoError(b, err)
	defer s.Close()
	graph, err := s.Capture(ctx)
	require.NoError(b, err)
	raw, err := newRawLoop(be, nchains, p.Streams[0].Priority, k, us)
	require.NoError(b, err)
	defer raw.close()
	rg, err := newRawGraph(raw, length)
	require.NoError(b, err)
	defer rg.close()
	replays := func() error {
		for range back {
			if err := graph.Launch(ctx); err != nil {
				return err
			}
		}
		return graph.Sync(ctx)
	}
	for range 5 { // warm up
		require.NoError(b, rg.launches(back))
		require.NoError(b, replays())
	}
	var tr, td []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		tr = append(tr, timeIt(b, func() error { return rg.launches(back) }))
		td = append(td, timeIt(b, replays))
	}
	b.StopTimer()
	mr, md := median(tr), median(td)
	if perOp {
		n := float64(nchains * length * back)
		b.ReportMetric(float64(mr.Nanoseconds())/n/1e3, "raw-graph-us/op")
		b.ReportMetric(float64(md.Nanoseconds())/n/1e3, "replay-us/op")
	} else {
		b.ReportMetric(float64(mr.Microseconds())/1e3/float64(back), "raw-graph-ms")
		b.ReportMetric(float64(md.Microseconds())/1e3/float64(back), "replay-ms")
	}
	b.ReportMetric(float64(md)/float64(mr), "replay/raw-graph")
}

// BenchmarkGraphReplayE: workload E (8 x 100 empty kernels) replayed, ten
// replays per sample: the device's cost per node.
func BenchmarkGraphReplayE(b *testing.B) { benchReplay(b, dag.Empty, 0, 10, true) }

// BenchmarkGraphReplayC: workload C (8 x 100 kernels spinning 10 us)
// replayed once per sample: the makespan (ideal 1.0 ms).
func BenchmarkGraphReplayC(b *testing.B) { benchReplay(b, dag.Spin, 10, 1, false) }

// BenchmarkGraphOneShot: the cost of using a graph once for the 800-op
// workload C, step by step: plan, open (kernels loaded, buffers made),
// capture, instantiate (with upload), first replay, close. CUDASTF's
// graph_ctx takes 20.6-23.1 ms to build, instantiate and run it.
func BenchmarkGraphOneShot(b *testing.B) {
	const nchains, length = 8, 100
	be := gpuBackend(b)
	g := chains(nchains, length, dag.Spin, 10, false)
	ctx := context.Background()
	var plan, open, capture, inst, first, closing, total []time.Duration
	once := func() error {
		start := time.Now()
		p, err := planner.New(g, planner.Streams(nchains))
		if err != nil {
			return err
		}
		t1 := time.Now()
		s, err := executor.Open(ctx, be, p)
		if err != nil {
			return err
		}
		t2 := time.Now()
		graph, err := s.Capture(ctx)
		if err != nil {
			return err
		}
		t3 := time.Now()
		if err := graph.Run(ctx); err != nil {
			return err
		}
		t4 := time.Now()
		if err := s.Close(); err != nil {
			return err
		}
		t5 := time.Now()
		st := graph.Stats()
		plan, open, first, closing = append(plan, t1.Sub(start)), append(open, t2.Sub(t1)), append(first, t4.Sub(t3)), append(closing, t5.Sub(t4))
		capture, inst = append(capture, st.Capture), append(inst, st.Instantiate)
		total = append(total, t4.Sub(start))
		return nil
	}
	require.NoError(b, once()) // compiles the builtin kernels once
	plan, open, capture, inst, first, closing, total = nil, nil, nil, nil, nil, nil, nil
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		require.NoError(b, once())
	}
	b.StopTimer()
	ms := func(d []time.Duration) float64 { return float64(median(d).Microseconds()) / 1e3 }
	b.ReportMetric(ms(plan), "plan-ms")
	b.ReportMetric(ms(open), "open-ms")
	b.ReportMetric(ms(capture), "capture-ms")
	b.ReportMetric(ms(inst), "instantiate-ms")
	b.ReportMetric(ms(first), "first-run-ms")
	b.ReportMetric(ms(closing), "close-ms")
	b.ReportMetric(ms(total), "total-ms")
}

// BenchmarkGraphUpdate: Update of one kernel argument of the 800-op
// workload E graph (recapture + cuGraphExecUpdate), then a replay.
func BenchmarkGraphUpdate(b *testing.B) {
	const nchains, length = 8, 100
	be := gpuBackend(b)
	g := chains(nchains, length, dag.Spin, 0, false)
	p, err := planner.New(g, planner.Streams(nchains))
	require.NoError(b, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, be, p)
	require.NoError(b, err)
	defer s.Close()
	graph, err := s.Capture(ctx)
	require.NoError(b, err)
	var tu []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tu = append(tu, timeIt(b, func() error {
			return graph.Update(ctx, executor.SetArg("c3_50", "us", float64(1+i%2)))
		}))
		require.NoError(b, graph.Run(ctx))
	}
	b.StopTimer()
	st := graph.Stats()
	b.ReportMetric(float64(median(tu).Microseconds())/1e3, "update-ms")
	b.ReportMetric(float64(st.UpdatesInPlace), "in-place")
	b.ReportMetric(float64(st.Reinstantiations), "reinstantiated")
}

// BenchmarkGraphBuild: the cost of making the 800-node graph of workload E
// three ways: captured from streams by a C loop (raw capture), added node
// by node with cuGraphAddKernelNode by a C loop (raw explicit), and
// captured from the plan by Session.Capture (dagrun capture; its
// instantiation is reported apart).
func BenchmarkGraphBuild(b *testing.B) {
	const nchains, length = 8, 100
	be := gpuBackend(b)
	g := chains(nchains, length, dag.Empty, 0, false)
	p, err := planner.New(g, planner.Streams(nchains))
	require.NoError(b, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, be, p)
	require.NoError(b, err)
	defer s.Close()
	raw, err := newRawLoop(be, nchains, p.Streams[0].Priority, dag.Empty, 0)
	require.NoError(b, err)
	defer raw.close()
	var tc, te, td, ti []time.Duration
	sample := func() {
		tc = append(tc, timeIt(b, func() error { return raw.buildRaw(length, false) }))
		te = append(te, timeIt(b, func() error { return raw.buildRaw(length, true) }))
		graph, err := s.Capture(ctx)
		require.NoError(b, err)
		td, ti = append(td, graph.Stats().Capture), append(ti, graph.Stats().Instantiate)
		require.NoError(b, graph.Close())
	}
	sample() // warm up
	tc, te, td, ti = nil, nil, nil, nil
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sample()
	}
	b.StopTimer()
	n := float64(nchains * length)
	us := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / n / 1e3 }
	b.ReportMetric(us(tc), "raw-capture-us/node")
	b.ReportMetric(us(te), "raw-explicit-us/node")
	b.ReportMetric(us(td), "capture-us/node")
	b.ReportMetric(float64(median(ti).Microseconds())/1e3, "instantiate-ms")
}

// BenchmarkReplayBranches replays 8 independent chains of short kernels
// planned for replay on 1, 2, 4 and 8 streams, beside the planner's
// estimate of each plan: how much a graph's branches cost next to the
// concurrency they buy, which the planner's replay model must weigh when it
// spreads small kernels over streams.
func BenchmarkReplayBranches(b *testing.B) {
	be := gpuBackend(b)
	ctx := context.Background()
	for _, us := range []float64{1, 5, 20} {
		for _, length := range []int{1, 4} {
			g := chains(8, length, dag.Spin, us, false)
			for _, streams := range []int{1, 2, 4, 8} {
				p, err := planner.New(g, planner.Streams(streams), planner.ForMode(planner.Replay))
				require.NoError(b, err)
				b.Run(fmt.Sprintf("us=%g/length=%d/streams=%d", us, length, streams), func(b *testing.B) {
					s, err := executor.Open(ctx, be, p)
					require.NoError(b, err)
					defer s.Close()
					graph, err := s.Capture(ctx)
					require.NoError(b, err)
					defer graph.Close()
					for range 3 {
						require.NoError(b, graph.Run(ctx))
					}
					start := time.Now()
					for range b.N {
						if err := graph.Launch(ctx); err != nil {
							b.Fatal(err)
						}
					}
					require.NoError(b, graph.Sync(ctx))
					b.ReportMetric(float64(time.Since(start).Nanoseconds())/1e3/float64(b.N), "us/replay")
					b.ReportMetric(float64(p.Stats.Makespan.Nanoseconds())/1e3, "est_us")
					b.ReportMetric(float64(p.Stats.Waits), "waits")
				})
			}
		}
	}
}

// BenchmarkAutoCaptureE: workload E run through Session.Run, as dagrun run
// --repeat runs it without --graph: eager for the first runs, then
// captured automatically and replayed. Sample by sample in one process,
// against Graph.Run of the same plan captured by hand (a launch and a wait
// each, as Session.Run is) and, for scale, against a session that stays
// eager. The figure is auto/replay once both are warm.
func BenchmarkAutoCaptureE(b *testing.B) {
	const nchains, length = 8, 100
	be := gpuBackend(b)
	g := chains(nchains, length, dag.Empty, 0, false)
	p, err := planner.New(g, planner.Streams(nchains))
	require.NoError(b, err)
	ctx := context.Background()
	open := func(opts ...executor.Option) *executor.Session {
		s, err := executor.Open(ctx, be, p, opts...)
		require.NoError(b, err)
		b.Cleanup(func() { require.NoError(b, s.Close()) })
		return s
	}
	auto, eager, byHand := open(executor.WithAutoCapture(executor.DefaultAutoCapture)), open(), open()
	graph, err := byHand.Capture(ctx)
	require.NoError(b, err)
	for range executor.DefaultAutoCapture + 5 { // the eager runs, the capture, warm-up
		require.NoError(b, auto.Run(ctx))
		require.NoError(b, eager.Run(ctx))
		require.NoError(b, graph.Run(ctx))
	}
	require.Contains(b, auto.RunLog().String(), "replayed")
	var ta, te, tr []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ta = append(ta, timeIt(b, func() error { return auto.Run(ctx) }))
		tr = append(tr, timeIt(b, func() error { return graph.Run(ctx) }))
		te = append(te, timeIt(b, func() error { return eager.Run(ctx) }))
	}
	b.StopTimer()
	n := float64(nchains * length)
	perOp := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / n / 1e3 }
	b.ReportMetric(perOp(ta), "auto-us/op")
	b.ReportMetric(perOp(tr), "replay-us/op")
	b.ReportMetric(perOp(te), "eager-us/op")
	b.ReportMetric(float64(median(ta))/float64(median(tr)), "auto/replay")
}

// BenchmarkReplayWait: one kernel spinning 20 us to 5 ms, replayed and
// waited for (Graph.Run) against the same kernel in a raw graph launched
// and waited for with cuStreamSynchronize, and run eagerly (Session.Run)
// against a raw launch and cuCtxSynchronize, samples alternated: what a
// Sync adds to a run of each length. Short waits are polled, long ones
// block on a goroutine of their own (syncPolling).
func BenchmarkReplayWait(b *testing.B) {
	be := gpuBackend(b)
	ctx := context.Background()
	for _, bc := range []struct {
		streams int
		us      float64
	}{{1, 20}, {1, 500}, {1, 2000}, {1, 5000}, {8, 20}} {
		name := fmt.Sprintf("%gus", bc.us)
		if bc.streams > 1 {
			name = fmt.Sprintf("%dx%gus", bc.streams, bc.us)
		}
		b.Run(name, func(b *testing.B) {
			p, err := planner.New(chains(bc.streams, 1, dag.Spin, bc.us, false), planner.Streams(bc.streams))
			require.NoError(b, err)
			s, err := executor.Open(ctx, be, p)
			require.NoError(b, err)
			defer s.Close()
			graph, err := s.Capture(ctx)
			require.NoError(b, err)
			raw, err := newRawLoop(be, bc.streams, p.Streams[0].Priority, dag.Spin, bc.us)
			require.NoError(b, err)
			defer raw.close()
			rg, err := newRawGraph(raw, 1)
			require.NoError(b, err)
			defer rg.close()
			for range 3 {
				require.NoError(b, rg.launches(1))
				require.NoError(b, graph.Run(ctx))
			}
			var tr, td, tre, te []time.Duration
			b.ResetTimer()
			for range b.N {
				tr = append(tr, timeIt(b, func() error { return rg.launches(1) }))
				td = append(td, timeIt(b, func() error { return graph.Run(ctx) }))
				tre = append(tre, timeIt(b, func() error { return raw.launchesC(1) }))
				te = append(te, timeIt(b, func() error { return s.Run(ctx) }))
			}
			b.StopTimer()
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
			b.ReportMetric(us(median(tr)), "raw-graph-us")
			b.ReportMetric(us(median(td)), "replay-us")
			b.ReportMetric(us(median(td)-median(tr)), "replay-added-us")
			b.ReportMetric(us(median(tre)), "raw-eager-us")
			b.ReportMetric(us(median(te)), "eager-us")
			b.ReportMetric(us(median(te)-median(tre)), "eager-added-us")
		})
	}
}
