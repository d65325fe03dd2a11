//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// Benchmarks of work across two devices, each beside its raw floor in the
// same run (scripts/gpu/multigpu.sh).

// BenchmarkSessionPeerCopy: 256 MiB from device 1 to device 0 through a
// session (peer access enabled by the backend, or through host memory)
// against a raw C loop of cuMemcpyPeerAsync (or the best raw staged copy)
// on the same buffers and stream, in the same run.
func BenchmarkSessionPeerCopy(b *testing.B) {
	for _, noPeer := range []bool{false, true} {
		var opts []Option
		name := "peer"
		if noPeer {
			opts, name = append(opts, NoPeer()), "via-host"
		}
		b.Run(name, func(b *testing.B) { peerCopy(b, twoDeviceBackend(b, opts...), 1, 0, noPeer) })
	}
}

// BenchmarkPeerCopyPairs: the peer copy of BenchmarkSessionPeerCopy
// between every ordered pair of the machine's devices (up to 8).
func BenchmarkPeerCopyPairs(b *testing.B) {
	be := twoDeviceBackend(b)
	n, err := be.drv.deviceCount()
	require.NoError(b, err)
	n = min(n, 8)
	for from := range n {
		for to := range n {
			if from != to {
				b.Run(fmt.Sprintf("%dto%d", from, to), func(b *testing.B) { peerCopy(b, be, from, to, false) })
			}
		}
	}
}

func peerCopy(b *testing.B, be *Backend, from, to int, noPeer bool) {
	const n = 256 << 20
	g := dag.New()
	src := g.Buffer("src", n, dag.OnDevice(from), dag.Zeros())
	dst := g.Buffer("dst", n, dag.OnDevice(to), dag.Zeros())
	cp := g.Copy(dst.All(), src.All(), dag.OnDevice(to))
	graph, err := g.Build()
	require.NoError(b, err)
	se := openSession(b, be, graph)
	require.NoError(b, se.sub.NewStream(to, dag.Normal))
	s := &se.sub.streams[0]
	sb, db := &se.hold.bufs[src.ID], &se.hold.bufs[dst.ID]
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
	}
	for range 2 { // warm-up
		require.NoError(b, se.sub.Run(0, cp))
	}
	require.NoError(b, se.host.Sync(b.Context()))
	b.Run("256MiB/eager/session", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		for range b.N {
			if err := se.sub.Run(0, cp); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, se.host.Sync(b.Context()))
		report(b, start)
	})
	require.NoError(b, se.capt.BeginCapture(0))
	require.NoError(b, se.sub.Run(0, cp))
	gi, err := se.capt.EndCapture(0)
	require.NoError(b, err)
	require.NoError(b, se.capt.Instantiate(gi))
	require.NoError(b, se.capt.LaunchGraph(gi, 0))
	require.NoError(b, se.host.Sync(b.Context()))
	b.Run("256MiB/replay/session", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		for range b.N {
			if err := se.capt.LaunchGraph(gi, 0); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, se.host.Sync(b.Context()))
		report(b, start)
	})
	b.Run("256MiB/eager/raw", func(b *testing.B) {
		b.ReportAllocs()
		if !noPeer {
			start := time.Now()
			require.NoError(b, be.drv.raw.peerCopies(s.dev.ctx, db.dptr, db.dev.ctx, sb.dptr, sb.dev.ctx, n, s.h, b.N))
			report(b, start)
			return
		}
		// The raw staged copy, through a buffer and a stream of its
		// own, with the fastest of several chunk sizes and slot
		// counts (tried first): the floor is the best raw loop,
		// not the session's choice written in C.
		up, err := be.drv.streams.create(sb.dev.ctx, 0)
		require.NoError(b, err)
		defer be.drv.streams.destroy(sb.dev.ctx, up)
		stage, err := be.drv.hostAlloc(s.dev.ctx, 64<<20)
		require.NoError(b, err)
		defer be.drv.hostFree(s.dev.ctx, stage)
		raw := func(chunk int64, slots, reps int) error {
			return be.drv.raw.stagedCopies(s.dev.ctx, s.h, sb.dev.ctx, up, db.dptr, sb.dptr, n, stage, chunk, slots, reps)
		}
		best, bestChunk, bestSlots := time.Duration(math.MaxInt64), int64(0), 0
		for _, chunk := range []int64{2 << 20, 4 << 20, 8 << 20, 16 << 20} {
			for _, slots := range []int{2, 4} {
				require.NoError(b, raw(chunk, slots, 1))
				t0 := time.Now()
				require.NoError(b, raw(chunk, slots, 3))
				if d := time.Since(t0); d < best {
					best, bestChunk, bestSlots = d, chunk, slots
				}
			}
		}
		b.Logf("raw staged copy: %s chunks, %d slots", dag.FormatBytes(bestChunk), bestSlots)
		start := time.Now()
		require.NoError(b, raw(bestChunk, bestSlots, b.N))
		report(b, start)
	})
}

// BenchmarkSessionAllReduce: all-reduce of 256 MiB f32 (bus bandwidth) and
// of 4 KiB (microseconds per call over 1,000 chained calls) across a world
// of joined sessions (2, and every device of the machine), eagerly and as
// a replayed graph, against each rank's raw C loop of ncclAllReduce on the
// same buffers and streams.
func BenchmarkSessionAllReduce(b *testing.B) {
	be := twoDeviceBackend(b)
	needNCCL(b, be)
	for _, world := range worlds(b, be) {
		b.Run(fmt.Sprintf("world%d", world), func(b *testing.B) { sessionAllReduce(b, be, world) })
	}
}

func sessionAllReduce(b *testing.B, be *Backend, world int) {
	for _, size := range []int64{256 << 20, 4 << 10} {
		chain := 1
		if size < 1<<20 {
			chain = 1000
		}
		name := dag.FormatBytes(size)
		graphs := make([]*dag.Graph, world)
		for r := range world {
			g := dag.New()
			v := g.Buffer("v", size, dag.OnDevice(r), dag.Of(dag.F32), dag.Zeros())
			g.AllReduce(v.All(), dag.Sum, dag.OnDevice(r))
			var err error
			graphs[r], err = g.Build()
			require.NoError(b, err)
		}
		ss, ps := ranks(b, be, graphs, time.Minute)
		stream := func(r int) int { return int(ps[r].OpStream[0]) }
		eager := func(r int, n int) error {
			op := graphs[r].Ops[0]
			for range n * chain {
				if err := ss[r].Run(stream(r), op); err != nil {
					return err
				}
			}
			return ss[r].Sync(context.Background())
		}
		report := func(b *testing.B, start time.Time) {
			per := time.Since(start).Seconds() / float64(b.N*chain)
			if chain > 1 {
				b.ReportMetric(per*1e6, "us/call")
			} else {
				b.ReportMetric(2*float64(world-1)/float64(world)*float64(size)/per/1e9, "busGB/s")
			}
		}
		requireAll := func(b *testing.B, errs []error) {
			for r, err := range errs {
				require.NoError(b, err, "rank %d", r)
			}
		}
		requireAll(b, onRanks(world, func(r int) error { return eager(r, 1) })) // warm-up: NCCL connects
		b.Run(name+"/eager/session", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			requireAll(b, onRanks(world, func(r int) error { return eager(r, b.N) }))
			report(b, start)
		})
		b.Run(name+"/eager/raw", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			requireAll(b, onRanks(world, func(r int) error {
				se := ss[r]
				s := &se.sub.streams[stream(r)]
				v := se.hold.bufs[graphs[r].Buffers[0].ID].dptr
				call := []ncclCall{{Kind: dag.AllReduce, Send: v, Recv: v, Count: size / 4, DType: dag.F32, Comm: se.colls.coll.comm, Stream: s.h}}
				if err := se.colls.coll.nccl.rawAllReduce(call, b.N*chain); err != nil {
					return err
				}
				return se.drv.streams.sync(s.dev.ctx, s.h)
			}))
			report(b, start)
		})
		gids := make([]int, world)
		requireAll(b, onRanks(world, func(r int) error {
			se := ss[r]
			if err := se.capt.BeginCapture(stream(r)); err != nil {
				return err
			}
			for range chain {
				if err := se.sub.Run(stream(r), graphs[r].Ops[0]); err != nil {
					se.capt.EndCapture(stream(r))
					return err
				}
			}
			gi, err := se.capt.EndCapture(stream(r))
			if err != nil {
				return err
			}
			gids[r] = gi
			if err := se.capt.Instantiate(gi); err != nil {
				return err
			}
			if err := se.capt.LaunchGraph(gi, stream(r)); err != nil {
				return err
			}
			return se.host.Sync(context.Background())
		}))
		b.Run(name+"/replay/session", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			requireAll(b, onRanks(world, func(r int) error {
				for range b.N {
					if err := ss[r].LaunchGraph(gids[r], stream(r)); err != nil {
						return err
					}
				}
				return ss[r].Sync(context.Background())
			}))
			report(b, start)
		})
		raws := make([]*rawCollGraph, world)
		requireAll(b, onRanks(world, func(r int) error {
			se := ss[r]
			s := &se.sub.streams[stream(r)]
			v := se.hold.bufs[graphs[r].Buffers[0].ID].dptr
			call := ncclCall{Kind: dag.AllReduce, Send: v, Recv: v, Count: size / 4, DType: dag.F32, Comm: se.colls.coll.comm, Stream: s.h}
			var err error
			if raws[r], err = se.colls.coll.nccl.rawAllReduceGraph(se.drv, s.dev.ctx, call, chain); err != nil {
				return err
			}
			return raws[r].replay(1) // warm
		}))
		b.Run(name+"/replay/raw", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			requireAll(b, onRanks(world, func(r int) error { return raws[r].replay(b.N) }))
			report(b, start)
		})
		for _, r := range raws {
			r.close()
		}
		closeRanks(b, be, ss)
	}
}

// BenchmarkPipelineReplay: a pipeline of 8 micro-batches across 2 devices,
// and across every device of the machine (up to 8): a kernel on device 0,
// then on each later device a copy of the previous device's result and a
// kernel there; 256 KiB each, so that the graph's launch and dependencies
// show. dagrun captures it as one graph and replays it, against the same
// work captured by hand in raw C (rawPipeline), with the same kernels and
// buffers, in the same run: microseconds per replay.
func BenchmarkPipelineReplay(b *testing.B) {
	be := twoDeviceBackend(b)
	for _, devices := range worlds(b, be) {
		b.Run(fmt.Sprintf("devices%d", devices), func(b *testing.B) { pipelineReplay(b, be, devices) })
	}
}

func pipelineReplay(b *testing.B, be *Backend, devices int) {
	topo, err := be.Topology()
	require.NoError(b, err)
	const stages, n = 8, 1 << 16
	g := dag.New()
	grid, block := dag.Dim3{X: 64, Y: 1, Z: 1}, dag.Dim3{X: 256, Y: 1, Z: 1}
	type step struct{ kernel, copy *dag.Op }
	steps := make([][]step, devices) // [device][micro-batch]
	for j := range steps {
		steps[j] = make([]step, stages)
	}
	for i := range stages {
		x := g.Buffer(fmt.Sprintf("x%d", i), 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(uint64(i)))
		steps[0][i].kernel = g.Launch(dag.Scale, grid, block, x, float32(1))
		prev := x
		for j := 1; j < devices; j++ {
			p := g.Buffer(fmt.Sprintf("p%d_%d", j, i), 4*n, dag.OnDevice(j), dag.Of(dag.F32), dag.Zeros())
			y := g.Buffer(fmt.Sprintf("y%d_%d", j, i), 4*n, dag.OnDevice(j), dag.Of(dag.F32), dag.Zeros())
			steps[j][i].copy = g.Copy(p.All(), prev.All(), dag.OnDevice(j))
			steps[j][i].kernel = g.Launch(dag.Axpy, grid, block, y, p, float32(0.5), dag.OnDevice(j))
			prev = y
		}
	}
	graph, err := g.Build()
	require.NoError(b, err)
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "us/replay")
	}
	// The planner's plan for a replay, as `dagrun run --graph` makes it
	// (it weighs a replay's branches against their overlap), and plans
	// held to one and two compute streams per device.
	for _, v := range []struct {
		name    string
		streams int
	}{{"graph", 0}, {"onestream", 1}, {"twostreams", 2}} {
		plan, err := planner.New(graph, planner.OnTopology(topo), planner.Streams(v.streams), planner.ForMode(planner.Replay))
		require.NoError(b, err)
		se := openSession(b, be, graph)
		require.NoError(b, runPlan(b.Context(), se, plan, true))
		require.NoError(b, se.BeginCapture(0))
		require.NoError(b, submit(se, plan))
		gi, err := se.EndCapture(0)
		require.NoError(b, err)
		require.NoError(b, se.Instantiate(gi))
		b.Run(v.name+"/session", func(b *testing.B) {
			b.Logf("dagrun's plan: %d streams, %d waits", plan.Stats.Streams, plan.Stats.Waits)
			for range 3 {
				require.NoError(b, se.LaunchGraph(gi, 0))
			}
			require.NoError(b, se.Sync(b.Context()))
			start := time.Now()
			for range b.N {
				if err := se.LaunchGraph(gi, 0); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, se.Sync(b.Context()))
			report(b, start)
		})
		raw := make([][]rawStep, devices)
		ctxs := make([]cuContext, devices)
		for j := range devices {
			d, err := se.hold.device(j)
			require.NoError(b, err)
			ctxs[j] = d.ctx
			raw[j] = make([]rawStep, stages)
			for i, st := range steps[j] {
				raw[j][i].kernel = se.sub.ops[st.kernel.ID].launch
				if st.copy != nil {
					src, dst := st.copy.Access[0].View, st.copy.Access[1].View
					raw[j][i].dst, raw[j][i].src, raw[j][i].n = se.hold.ptr(dst), se.hold.ptr(src), src.Size
				}
			}
		}
		rp, err := be.drv.newRawPipeline(ctxs, raw)
		require.NoError(b, err)
		b.Run(v.name+"/raw", func(b *testing.B) {
			require.NoError(b, rp.replays(3))
			start := time.Now()
			require.NoError(b, rp.replays(b.N))
			report(b, start)
		})
		rp.close()
		require.NoError(b, se.Close())
	}
}
