package devicetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// kindCase is a graph that exercises op kinds: the backend runs it, once
// eagerly and once replayed from a capture, and must give what the
// reference gives.
type kindCase struct {
	name  string
	kinds []dag.OpKind // the kinds it covers
	ranks int          // 0 or 1: one graph; 2: a world of two ranks, rank r on device r
	ulp   int64        // the f32 elements may differ by this many units in the last place,
	abs   float64      // or by this much
	// declare declares rank's graph.
	declare func(b *dag.Builder, rank int)
}

// kindCases covers every kind of dag.OpKinds(); the Kinds case fails when
// one is missing.
var kindCases = []kindCase{
	{name: "alloc_free", kinds: []dag.OpKind{dag.Alloc, dag.Free}, declare: func(b *dag.Builder, _ int) {
		tmp := b.Buffer("tmp", 4*8, dag.OnDevice(0), dag.Of(dag.F32), dag.Temporary())
		out := b.Buffer("out", 4*8, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		b.Alloc(tmp)
		b.Launch(dag.Iota, one, dag.Threads(8), tmp, float32(5))
		b.Launch(dag.Scale, one, dag.Threads(8), tmp, float32(2))
		b.Copy(out.All(), tmp.All())
		b.Free(tmp)
	}},
	{name: "copy", kinds: []dag.OpKind{dag.Copy}, declare: func(b *dag.Builder, _ int) {
		src := b.Buffer("src", 64, dag.PinnedHost(), dag.Random(1))
		dev := b.Buffer("dev", 64, dag.OnDevice(0), dag.Value(9))
		dev2 := b.Buffer("dev2", 64, dag.OnDevice(0), dag.Zeros())
		back := b.Buffer("back", 64, dag.PinnedHost(), dag.Zeros())
		b.Copy(dev.Slice(8, 48), src.Slice(0, 48))
		b.Copy(dev2.All(), dev.All())
		b.Copy(back.Slice(16, 48), dev2.Slice(0, 48))
	}},
	{name: "fill", kinds: []dag.OpKind{dag.Fill}, declare: func(b *dag.Builder, _ int) {
		f := b.Buffer("f32", 4*16, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		i := b.Buffer("i32", 4*16, dag.OnDevice(0), dag.Of(dag.I32), dag.Value(3))
		u := b.Buffer("u8", 16, dag.OnDevice(0), dag.Of(dag.U8), dag.Zeros())
		h := b.Buffer("bf16", 2*16, dag.OnDevice(0), dag.Of(dag.BF16), dag.Zeros())
		b.Fill(f.All(), -1.5)
		b.Fill(i.Slice(8, 16), -7)
		b.Fill(u.Slice(3, 5), 200)
		b.Fill(h.All(), 0.1)
	}},
	{name: "memset2d", kinds: []dag.OpKind{dag.Memset2D}, declare: func(b *dag.Builder, _ int) {
		x := b.Buffer("x", 4*64, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		b.Memset2D(x.Slice(8, 4*40), dag.Memset2DSpec{Rows: 4, Width: 3, Pitch: 40}, 6)
	}},
	{name: "host", kinds: []dag.OpKind{dag.Host}, declare: func(b *dag.Builder, _ int) {
		x := b.Buffer("x", 4*8, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(2))
		hx := b.Buffer("hx", 4*8, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
		hsum := b.Buffer("hsum", 4, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
		sum := b.Buffer("sum", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		b.Launch(dag.Scale, one, dag.Threads(8), x, float32(1.5))
		b.Copy(hx.All(), x.All())
		b.Host(func(_ context.Context, mem [][]byte) error {
			var s float32
			for _, v := range f32s(mem[0]) {
				s += v
			}
			binary.LittleEndian.PutUint32(mem[1], math.Float32bits(s))
			return nil
		}, dag.In(hx.All()), dag.Out(hsum.All()))
		b.Copy(sum.All(), hsum.All())
		b.Launch(dag.Scale, one, one, sum, float32(-1))
	}},
	{name: "task", kinds: []dag.OpKind{dag.Task}, declare: func(b *dag.Builder, _ int) {
		// The task enqueues nothing on a device and does nothing on
		// the host: what is checked is that it runs in its place.
		x := b.Buffer("x", 4*8, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		b.Fill(x.All(), 2)
		b.Task(func(context.Context, dag.TaskStream) error { return nil }, dag.InOut(x.All()), dag.Name("noop"), dag.RunsOnCPU())
		b.Launch(dag.Scale, one, dag.Threads(8), x, float32(3))
	}},
	{name: "gemm", kinds: []dag.OpKind{dag.Gemm}, declare: func(b *dag.Builder, _ int) {
		// Small integers: every product and sum is exact in f32, so
		// every backend gives the same bits in any order.
		const m, n, k = 5, 3, 4
		a := b.Buffer("a", 4*m*k, dag.OnDevice(0), dag.Of(dag.F32), dag.Contents(smallInts(m*k, 1)))
		bm := b.Buffer("b", 4*k*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Contents(smallInts(k*n, 2)))
		c := b.Buffer("c", 4*m*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Contents(smallInts(m*n, 3)))
		b.Gemm(c.All(), a.All(), bm.All(), dag.GemmShape{M: m, N: n, K: k}, dag.Alpha(2), dag.Beta(1))
	}},
	{name: "while", kinds: []dag.OpKind{dag.While}, declare: func(b *dag.Builder, _ int) {
		x := b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		sum := b.Buffer("sum", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
		flag := b.Buffer("flag", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
		b.Fill(x.All(), 1)
		b.Fill(flag.All(), 1)
		b.While(flag.All(), func(body *dag.Builder) {
			body.Launch(dag.Scale, one, dag.Threads(4), x, float32(0.5))
			body.Launch(dag.ReduceSum, one, one, sum, x)
			body.Launch(dag.SetFlag, one, one, flag, sum, 0.3)
		}, dag.AtMost(50))
	}},
	{name: "if", kinds: []dag.OpKind{dag.If}, declare: func(b *dag.Builder, _ int) {
		x := b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(3))
		on := b.Buffer("on", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Value(1))
		off := b.Buffer("off", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
		b.Fill(off.All(), 0)
		b.If(on.All(), func(then *dag.Builder) {
			then.Launch(dag.Scale, one, dag.Threads(4), x, float32(2))
		}, func(els *dag.Builder) {
			els.Fill(x.All(), -1)
		})
		b.If(off.All(), func(then *dag.Builder) {
			then.Fill(x.All(), -2)
		}, func(els *dag.Builder) {
			els.Launch(dag.Scale, one, dag.Threads(4), x, float32(5))
		})
	}},
	{name: "all_reduce", kinds: []dag.OpKind{dag.AllReduce}, ranks: 2, declare: func(b *dag.Builder, r int) {
		x := b.Buffer("x", 4*8, dag.OnDevice(r), dag.Of(dag.F32), dag.Value(float64(r+1)))
		b.AllReduce(x.All(), dag.Sum)
		y := b.Buffer("y", 4*8, dag.OnDevice(r), dag.Of(dag.I32), dag.Value(float64(3*r-1)))
		b.AllReduce(y.All(), dag.Max)
	}},
	{name: "all_gather", kinds: []dag.OpKind{dag.AllGather}, ranks: 2, declare: func(b *dag.Builder, r int) {
		in := b.Buffer("in", 4*4, dag.OnDevice(r), dag.Of(dag.F32), dag.Value(float64(r+1)))
		out := b.Buffer("out", 4*8, dag.OnDevice(r), dag.Of(dag.F32), dag.Zeros())
		b.AllGather(in.All(), out.All())
	}},
	{name: "reduce_scatter", kinds: []dag.OpKind{dag.ReduceScatter}, ranks: 2, declare: func(b *dag.Builder, r int) {
		in := b.Buffer("in", 4*8, dag.OnDevice(r), dag.Of(dag.F32), dag.Random(uint64(r+1)))
		out := b.Buffer("out", 4*4, dag.OnDevice(r), dag.Of(dag.F32), dag.Zeros())
		b.ReduceScatter(in.All(), out.All(), dag.Sum)
	}},
	{name: "broadcast", kinds: []dag.OpKind{dag.Broadcast}, ranks: 2, declare: func(b *dag.Builder, r int) {
		x := b.Buffer("x", 4*8, dag.OnDevice(r), dag.Of(dag.F32), dag.Value(float64(r+4)))
		b.Broadcast(x.All(), 1)
	}},
	{name: "send_recv", kinds: []dag.OpKind{dag.Send, dag.Recv}, ranks: 2, declare: func(b *dag.Builder, r int) {
		x := b.Buffer("x", 4*8, dag.OnDevice(r), dag.Of(dag.F32), dag.Value(float64(r+7)))
		if r == 0 {
			b.Send(x.All(), 1)
		} else {
			b.Recv(x.All(), 0)
		}
	}},
}

// launchCases run each builtin kernel, f32 and some of the half variants.
func launchCases() []kindCase {
	vec := func(b *dag.Builder, name string, seed uint64, dt dag.DType) *dag.Buffer {
		return b.Buffer(name, 37*dt.Size(), dag.OnDevice(0), dag.Of(dt), dag.Random(seed))
	}
	grid, block := dag.Grid1(2), dag.Threads(32)
	cases := []struct {
		name    string
		ulp     int64
		abs     float64
		declare func(b *dag.Builder)
	}{
		{"empty", 0, 0, func(b *dag.Builder) { b.Launch(dag.Empty, one, one) }},
		{"spin", 0, 0, func(b *dag.Builder) { b.Launch(dag.Spin, one, one, 50.0) }},
		{"iota", 0, 0, func(b *dag.Builder) { b.Launch(dag.Iota, grid, block, vec(b, "x", 1, dag.F32), float32(-3.25)) }},
		{"scale", 0, 0, func(b *dag.Builder) { b.Launch(dag.Scale, grid, block, vec(b, "x", 2, dag.F32), float32(1.7)) }},
		{"axpy", 0, 0, func(b *dag.Builder) {
			b.Launch(dag.Axpy, grid, block, vec(b, "y", 3, dag.F32), vec(b, "x", 4, dag.F32), float32(0.3))
		}},
		{"add", 0, 0, func(b *dag.Builder) {
			b.Launch(dag.Add, grid, block, vec(b, "c", 5, dag.F32), vec(b, "a", 6, dag.F32), vec(b, "b", 7, dag.F32))
		}},
		{"reduce_sum", 1, 0, func(b *dag.Builder) {
			b.Launch(dag.ReduceSum, grid, block, b.Buffer("out", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros()), vec(b, "in", 8, dag.F32))
		}},
		{"matmul", 0, 0, func(b *dag.Builder) {
			const m, n, k = 7, 5, 6
			c := b.Buffer("c", 4*m*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
			a := b.Buffer("a", 4*m*k, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(9))
			x := b.Buffer("b", 4*k*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(10))
			b.Launch(dag.Matmul, grid, block, c, a, x, m, n, k)
		}},
		{"relu", 0, 0, func(b *dag.Builder) {
			b.Launch(dag.Relu, grid, block, vec(b, "y", 11, dag.F32), vec(b, "x", 12, dag.F32))
		}},
		{"gelu", 8, 1e-6, func(b *dag.Builder) {
			b.Launch(dag.Gelu, grid, block, vec(b, "y", 13, dag.F32), vec(b, "x", 14, dag.F32))
		}},
		{"bias_add", 0, 0, func(b *dag.Builder) {
			y := b.Buffer("y", 4*6*5, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(15))
			b.Launch(dag.BiasAdd, grid, block, y, b.Buffer("b", 4*5, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(16)))
		}},
		{"softmax", 8, 1e-6, func(b *dag.Builder) {
			y := b.Buffer("y", 4*6*5, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
			x := b.Buffer("x", 4*6*5, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(17))
			b.Launch(dag.Softmax, grid, block, y, x, 5)
		}},
		{"set_flag", 0, 0, func(b *dag.Builder) {
			f := b.Buffer("flag", 8, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
			x := b.Buffer("x", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(0.5))
			x64 := b.Buffer("x64", 8, dag.OnDevice(0), dag.Of(dag.F64), dag.Value(0.25))
			b.Launch(dag.SetFlag, one, one, f.Slice(0, 4), x, 0.4)
			b.Launch(dag.SetFlag, one, one, f.Slice(4, 4), x64, 0.4)
		}},
		{"scale_f16", 0, 0, func(b *dag.Builder) { b.Launch(dag.Scale, grid, block, vec(b, "x", 18, dag.F16), float32(-0.75)) }},
		{"axpy_bf16", 0, 0, func(b *dag.Builder) {
			b.Launch(dag.Axpy, grid, block, vec(b, "y", 19, dag.BF16), vec(b, "x", 20, dag.BF16), float32(2.5))
		}},
	}
	out := make([]kindCase, len(cases))
	for i, c := range cases {
		out[i] = kindCase{name: "launch_" + c.name, kinds: []dag.OpKind{dag.Launch}, ulp: c.ulp, abs: c.abs,
			declare: func(b *dag.Builder, _ int) { c.declare(b) }}
	}
	return out
}

// smallInts is n f32 values from -3 to 3, varied by seed.
func smallInts(n int, seed int) []byte {
	out := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32((i*seed+seed)%7-3)))
	}
	return out
}

// kinds runs every kind case.
func (s *suite) kinds(t *testing.T) {
	cases := append(append([]kindCase(nil), kindCases...), launchCases()...)
	covered := map[dag.OpKind]bool{}
	for _, kc := range cases {
		for _, k := range kc.kinds {
			covered[k] = true
		}
	}
	for _, k := range dag.OpKinds() {
		if !covered[k] {
			t.Errorf("no case runs op kind %s: add one to devicetest's kindCases", k)
		}
	}
	for _, kc := range cases {
		t.Run(kc.name, func(t *testing.T) {
			if kc.ranks > 1 {
				s.world(t, kc)
				return
			}
			s.single(t, kc)
		})
	}
}

// single runs a one-graph case eagerly and replayed.
func (s *suite) single(t *testing.T, kc kindCase) {
	g := build(t, func(b *dag.Builder) { kc.declare(b, 0) })
	p, err := planner.New(g)
	require.NoError(t, err)
	want, err := s.execute(t, s.ref, p, false)
	require.NoError(t, err, "on the reference backend")
	got, err := s.execute(t, s.open, p, false)
	skipUnsupported(t, err)
	require.NoError(t, err)
	compare(t, g, got, want, kc.ulp, kc.abs)
	t.Run("replayed", func(t *testing.T) {
		if err := executor.CheckCapture(p); err != nil {
			t.Skipf("the plan cannot be captured: %v", err)
		}
		got, err := s.execute(t, s.open, p, true)
		require.NoError(t, err)
		compare(t, g, got, want, kc.ulp, kc.abs)
	})
}

// execute runs p once on a backend open makes, eagerly or as one replay
// of a capture, and returns its persistent buffers.
func (s *suite) execute(t *testing.T, open Opener, p *planner.Plan, replay bool) (executor.Results, error) {
	t.Helper()
	ctx := s.ctx(t)
	b := s.backend(t, open)
	if !replay {
		return executor.Execute(ctx, b, p)
	}
	es, err := executor.Open(ctx, b, p)
	if err != nil {
		return nil, err
	}
	defer func() { require.NoError(t, es.Close()) }()
	capability[device.Capturer](t, es.Device())
	g, err := es.Capture(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.Run(ctx); err != nil {
		return nil, err
	}
	return read(func(buf *dag.Buffer) ([]byte, error) { return es.Read(buf) }, p.Graph)
}

// world runs a case of two ranks, each on its own device.
func (s *suite) world(t *testing.T, kc kindCase) {
	if s.devices < kc.ranks {
		t.Skipf("a world of %d ranks needs %d devices; the backend has %d (devicetest.Devices)", kc.ranks, kc.ranks, s.devices)
	}
	var graphs []*dag.Graph
	var plans []*planner.Plan
	for r := range kc.ranks {
		g := build(t, func(b *dag.Builder) { kc.declare(b, r) })
		p, err := planner.New(g)
		require.NoError(t, err)
		graphs, plans = append(graphs, g), append(plans, p)
	}
	// run runs the world twice: eagerly twice, or eagerly and then as one
	// replay of a capture (on CUDA the first collectives connect the ranks,
	// which a capture cannot hold).
	run := func(t *testing.T, open Opener, replay bool) ([]executor.Results, error) {
		ctx := s.ctx(t)
		b := s.backend(t, open)
		probe, err := b.Open(ctx, graphs[0])
		if err != nil {
			return nil, err
		}
		_, joins := probe.(device.Joiner)
		_, captures := probe.(device.Capturer)
		require.NoError(t, probe.Close())
		if !joins {
			t.Skipf("%T does not implement device.Joiner", probe)
		}
		if replay && !captures {
			t.Skipf("%T does not implement device.Capturer", probe)
		}
		w, err := executor.OpenWorld(ctx, b, plans)
		if err != nil {
			return nil, err
		}
		defer func() { require.NoError(t, w.Close()) }()
		if err := w.Run(ctx); err != nil {
			return nil, err
		}
		if replay {
			wg, err := w.Capture(ctx)
			if err != nil {
				return nil, err
			}
			if err := wg.Run(ctx); err != nil {
				return nil, err
			}
		} else if err := w.Run(ctx); err != nil {
			return nil, err
		}
		out := make([]executor.Results, kc.ranks)
		for r := range out {
			if out[r], err = read(func(buf *dag.Buffer) ([]byte, error) { return w.Read(r, buf) }, graphs[r]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	want, err := run(t, s.ref, false)
	require.NoError(t, err, "on the reference backend")
	for _, replay := range []bool{false, true} {
		name := "eager"
		if replay {
			name = "replayed"
		}
		t.Run(name, func(t *testing.T) {
			got, err := run(t, s.open, replay)
			skipUnsupported(t, err)
			require.NoError(t, err)
			for r := range graphs {
				t.Logf("rank %d", r)
				compare(t, graphs[r], got[r], want[r], kc.ulp, kc.abs)
			}
		})
	}
}

// read reads every persistent buffer of g.
func read(readBuf func(*dag.Buffer) ([]byte, error), g *dag.Graph) (executor.Results, error) {
	out := executor.Results{}
	for _, buf := range g.Buffers {
		if buf.Temporary {
			continue
		}
		data, err := readBuf(buf)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", buf.Name, err)
		}
		out[buf] = data
	}
	return out, nil
}

// compare checks every persistent buffer of g.
func compare(t *testing.T, g *dag.Graph, got, want executor.Results, maxULP int64, abs float64) {
	t.Helper()
	var errs []error
	for _, buf := range g.Buffers {
		if buf.Temporary {
			continue
		}
		errs = append(errs, sameContents(buf, got[buf], want[buf], maxULP, abs))
	}
	require.NoError(t, errors.Join(errs...), "against the reference backend")
}
