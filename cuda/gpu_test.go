//go:build cgo

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

func TestBuiltinKernels(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	const n = 10007 // not a multiple of any block size
	shapes := []struct{ grid, block dag.Dim3 }{
		{dag.Grid1(1), dag.Grid1(1)},
		{dag.Grid1(40), dag.Grid1(256)},
		{dag.Dim(3, 2, 2), dag.Dim(7, 3, 2)},
	}
	kernels := []struct {
		name string
		make func(g *dag.Builder, grid, block dag.Dim3)
		ulp  int64
	}{
		{"iota", func(g *dag.Builder, grid, block dag.Dim3) {
			g.Launch(dag.Iota, grid, block, g.Buffer("x", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(1)), float32(-3.25))
		}, 0},
		{"scale", func(g *dag.Builder, grid, block dag.Dim3) {
			g.Launch(dag.Scale, grid, block, g.Buffer("x", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(2)), float32(1.7))
		}, 0},
		{"axpy", func(g *dag.Builder, grid, block dag.Dim3) {
			y := g.Buffer("y", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(3))
			x := g.Buffer("x", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(4))
			g.Launch(dag.Axpy, grid, block, y, x, float32(0.3))
		}, 0},
		{"add", func(g *dag.Builder, grid, block dag.Dim3) {
			c := g.Buffer("c", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
			a := g.Buffer("a", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(5))
			x := g.Buffer("b", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(6))
			g.Launch(dag.Add, grid, block, c, a, x)
		}, 0},
		{"reduce_sum", func(g *dag.Builder, grid, block dag.Dim3) {
			out := g.Buffer("out", 16, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(9))
			in := g.Buffer("in", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(7))
			g.Launch(dag.ReduceSum, grid, block, out, in)
		}, 1},
		{"matmul", func(g *dag.Builder, grid, block dag.Dim3) {
			const m, nn, k = 37, 29, 53
			c := g.Buffer("c", 4*m*nn, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
			a := g.Buffer("a", 4*m*k, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(8))
			x := g.Buffer("b", 4*k*nn, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(9))
			g.Launch(dag.Matmul, grid, block, c, a, x, m, nn, k)
		}, 0},
		{"views", func(g *dag.Builder, grid, block dag.Dim3) {
			x := g.Buffer("x", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(10))
			g.Launch(dag.Scale, grid, block, x.Slice(400, 4000), float32(-2))
			g.Launch(dag.Iota, grid, block, x.Slice(8000, 400), float32(7))
		}, 0},
		{"empty and spin", func(g *dag.Builder, grid, block dag.Dim3) {
			g.Launch(dag.Empty, grid, block)
			g.Launch(dag.Spin, grid, block, 20.0)
		}, 0},
	}
	for _, k := range kernels {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%vx%v", k.name, s.grid, s.block), func(t *testing.T) {
				g := dag.New()
				k.make(g, s.grid, s.block)
				graph, err := g.Build()
				require.NoError(t, err)
				runGraph(t, b, graph, k.ulp)
			})
		}
	}
	assertReleased(t, b, "")
}

func TestCopiesAndFills(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	const size = 1 << 16
	dev := g.Buffer("dev", size, dag.OnDevice(0), dag.Random(1))
	pinned := g.Buffer("pinned", size, dag.PinnedHost(), dag.Random(2))
	pageable := g.Buffer("pageable", size, dag.PageableHost(), dag.Random(3))
	dev2 := g.Buffer("dev2", size, dag.OnDevice(0), dag.Zeros())
	tmp := g.Buffer("tmp", size, dag.OnDevice(0), dag.Temporary(), dag.Uninitialized())
	htmp := g.Buffer("htmp", size, dag.PinnedHost(), dag.Temporary(), dag.Uninitialized())
	out := g.Buffer("out", size, dag.PinnedHost(), dag.Zeros())
	out2 := g.Buffer("out2", size, dag.PageableHost(), dag.Zeros())
	g.Copy(dev2.Slice(0, 4096), pinned.Slice(4096, 4096))      // pinned -> device
	g.Copy(dev2.Slice(8192, 4096), pageable.Slice(100, 4096))  // pageable -> device
	g.Copy(pinned.Slice(0, 4096), dev.Slice(0, 4096))          // device -> pinned
	g.Copy(pageable.Slice(20000, 4096), dev.Slice(4096, 4096)) // device -> pageable
	g.Copy(pinned.Slice(30000, 1000), pageable.Slice(0, 1000)) // pageable -> pinned
	g.Copy(pageable.Slice(40000, 1000), pinned.Slice(1, 1000)) // pinned -> pageable
	g.Copy(dev.Slice(32768, 1024), dev2.Slice(8192, 1024))     // device -> device
	g.Copy(out.Slice(0, 4096), tmp.Slice(0, 4096))             // a fresh temporary reads as zeros
	g.Copy(out.Slice(4096, 4096), htmp.Slice(0, 4096))         // so does a host one
	g.Copy(tmp.Slice(0, 8192), dev2.Slice(0, 8192))
	g.Copy(out.Slice(8192, 8192), tmp.Slice(0, 8192))
	for i, dt := range []dag.DType{dag.U8, dag.I32, dag.I64, dag.F32, dag.F64} {
		d := g.Buffer(fmt.Sprintf("fill_%s", dt), 1024, dag.OnDevice(0), dag.Of(dt), dag.Random(uint64(i)))
		h := g.Buffer(fmt.Sprintf("hfill_%s", dt), 1024, dag.PinnedHost(), dag.Of(dt), dag.Random(uint64(i)))
		p := g.Buffer(fmt.Sprintf("pfill_%s", dt), 1024, dag.PageableHost(), dag.Of(dt), dag.Random(uint64(i)))
		for _, buf := range []*dag.Buffer{d, h, p} {
			g.Fill(buf.Slice(8*8, 8*64), 250)
			g.Fill(buf.Slice(8*80, 8*16), 3)
			g.Fill(buf.Slice(8*100, 8*20), 0)
		}
	}
	g.Copy(out2.All(), out.All())
	graph, err := g.Build()
	require.NoError(t, err)
	runGraph(t, b, graph, 0)
	assertReleased(t, b, "")
}

// hazardGraph uses one buffer from several streams (priorities put ops on
// different streams) in every pattern: RAW, WAR, WAW on overlapping and
// disjoint ranges, and a temporary freed after readers on other streams.
// Each op waits for a spin of random length first, so that a missing wait
// shows as a wrong result.
func hazardGraph(rng *rand.Rand) *dag.Graph {
	g := dag.New()
	const n = 1 << 14
	x := g.Buffer("x", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(1))
	y := g.Buffer("y", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(2))
	z := g.Buffer("z", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	s := g.Buffer("s", 64, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	t := g.Buffer("t", 4*n, dag.OnDevice(0), dag.Of(dag.F32), dag.Temporary())
	out := g.Buffer("out", 4*n, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	prios := []dag.Priority{dag.High, dag.Low, dag.Normal}
	grid, block := dag.Grid1(16), dag.Grid1(128)
	i := 0
	jitter := func(o *dag.Op) {
		p := prios[i%len(prios)]
		i++
		sp := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), float64(rng.IntN(60)), p)
		o.With(p, dag.After(sp))
	}
	half := int64(4 * n / 2)
	jitter(g.Launch(dag.Iota, grid, block, x.Slice(0, half), float32(1)))           // write x lo
	jitter(g.Launch(dag.Scale, grid, block, x.Slice(half, half), float32(3)))       // write x hi: disjoint
	jitter(g.Launch(dag.Scale, grid, block, x, float32(2)))                         // RAW + WAW on both halves
	jitter(g.Launch(dag.Axpy, grid, block, y, x, float32(3)))                       // RAW on x
	jitter(g.Launch(dag.Add, grid, block, z, x, y))                                 // RAW on x, y
	jitter(g.Launch(dag.Iota, grid, block, x.Slice(0, half), float32(5)))           // WAR after axpy and add
	jitter(g.Copy(t.All(), x.All()))                                                // temporary from x
	jitter(g.Launch(dag.Axpy, grid, block, y, t, float32(1)))                       // reader of t
	jitter(g.Launch(dag.ReduceSum, dag.Grid1(1), dag.Grid1(256), s.Slice(0, 4), t)) // another reader of t
	jitter(g.Launch(dag.Scale, grid, block, t, float32(0.5)))                       // WAR on t, then t is freed
	jitter(g.Launch(dag.Axpy, grid, block, z, t, float32(-1)))
	jitter(g.Copy(out.All(), z.All()))
	jitter(g.Fill(z.Slice(0, half), 4))             // WAR after the copy out
	jitter(g.Launch(dag.Add, grid, block, y, z, x)) // RAW, WAW on y
	graph, err := g.Build()
	if err != nil {
		panic(err)
	}
	return graph
}

func TestHazardsRepeated(t *testing.T) {
	b := gpuBackend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 100 {
		g := hazardGraph(rng)
		p, err := planner.New(g, planner.Streams(3))
		require.NoError(t, err)
		if run == 0 {
			require.Greater(t, p.Stats.Waits, 3, "the graph should cross streams")
		}
		se := openSession(t, b, g)
		require.NoError(t, runPlan(context.Background(), se, p, true), "run %d", run)
		checkResults(t, se, p, 1)
		require.NoError(t, se.Close())
	}
	assertReleased(t, b, "")
}

func TestHostSteps(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	x := g.Buffer("x", 4096, dag.OnDevice(0), dag.Of(dag.F32), dag.Random(1))
	h := g.Buffer("h", 4096, dag.PinnedHost(), dag.Of(dag.F32), dag.Zeros())
	p := g.Buffer("p", 4096, dag.PageableHost(), dag.Of(dag.F32), dag.Zeros())
	g.Copy(h.All(), x.All())
	g.Host(func(ctx context.Context, mem [][]byte) error {
		v := f32s(mem[0])
		for i := range v {
			v[i] += 1
		}
		putF32s(mem[1], v)
		return nil
	}, dag.In(h.All()), dag.Out(p.All()), dag.Name("plus_one"))
	g.Copy(x.All(), p.All())
	g.Launch(dag.Scale, dag.Grid1(4), dag.Grid1(64), x, float32(2))
	graph, err := g.Build()
	require.NoError(t, err)
	runGraph(t, b, graph, 0)

	for _, fail := range []func(){
		func() {},
		func() { panic("boom") },
	} {
		g := dag.New()
		h := g.Buffer("h", 64, dag.PinnedHost(), dag.Zeros())
		g.Host(func(ctx context.Context, mem [][]byte) error {
			fail()
			return errors.New("checksum mismatch")
		}, dag.InOut(h.All()), dag.Name("check"))
		graph, err := g.Build()
		require.NoError(t, err)
		p, err := planner.New(graph)
		require.NoError(t, err)
		se := openSession(t, b, graph)
		err = runPlan(context.Background(), se, p, true)
		var oe *dag.OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "check", oe.Op)
		require.NoError(t, se.Close())
	}
}

func TestTiming(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	var prev *dag.Op
	for i := range 5 {
		o := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 100.0, dag.Name(fmt.Sprintf("spin%d", i)))
		if prev != nil {
			o.With(dag.After(prev))
		}
		prev = o
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph)
	require.NoError(t, err)
	se := openSession(t, b, graph)
	se.tim.SetTiming(true)
	defer func() { require.NoError(t, se.Close()) }()
	for run := range 2 {
		require.NoError(t, runPlan(context.Background(), se, p, run == 0))
		var ends []time.Duration
		require.NoError(t, se.tim.Spans(func(op, stream int, start, end time.Duration) {
			assert.GreaterOrEqual(t, end-start, 95*time.Microsecond, "op %d", op)
			assert.Less(t, end-start, 2*time.Millisecond, "op %d", op)
			if len(ends) > 0 {
				assert.GreaterOrEqual(t, start, ends[len(ends)-1])
			}
			ends = append(ends, end)
		}))
		assert.Len(t, ends, 5)
	}
}

// TestPriorities fills the device with low-priority work and times a chain
// of short kernels on another stream, once with high priority and once
// with the same low priority.
func TestPriorities(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	const chain = 10
	var lows, highs []*dag.Op
	for i := range 8 {
		lows = append(lows, g.Launch(dag.Spin, dag.Grid1(132*32*10), dag.Grid1(64), 20.0, dag.Name(fmt.Sprintf("low%d", i))))
	}
	for i := range chain {
		highs = append(highs, g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 20.0, dag.Name(fmt.Sprintf("high%d", i))))
	}
	graph, err := g.Build()
	require.NoError(t, err)
	se := openSession(t, b, graph)
	se.tim.SetTiming(true)
	defer func() { require.NoError(t, se.Close()) }()
	require.NoError(t, se.sub.NewStream(0, dag.Low))  // 0: the background load
	require.NoError(t, se.sub.NewStream(0, dag.High)) // 1
	require.NoError(t, se.sub.NewStream(0, dag.Low))  // 2: the same chain at equal priority
	chainEnd := func(s int) time.Duration {
		var end, loadEnd time.Duration
		for range 2 { // the first round warms up
			for _, o := range lows {
				require.NoError(t, se.sub.Run(0, o))
			}
			for _, o := range highs {
				require.NoError(t, se.sub.Run(s, o))
			}
			require.NoError(t, se.host.Sync(context.Background()))
			end, loadEnd = 0, 0
			require.NoError(t, se.tim.Spans(func(op, stream int, start, e time.Duration) {
				if stream == s {
					end = max(end, e)
				} else {
					loadEnd = max(loadEnd, e)
				}
			}))
		}
		t.Logf("stream %d: the chain of %d ends at %v, the load at %v", s, chain, end, loadEnd)
		return end
	}
	high := chainEnd(1)
	equal := chainEnd(2)
	t.Logf("PRIORITY high-priority chain %v, equal-priority chain %v, ratio %.2f", high, equal, float64(high)/float64(equal))
	assert.Less(t, float64(high), 0.8*float64(equal), "a high-priority chain should finish well before an equal-priority one")
}

func TestCancelledRun(t *testing.T) {
	b := gpuBackend(t)
	g := dag.New()
	var prev *dag.Op
	for i := range 400 {
		o := g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 1000.0, dag.Name(fmt.Sprintf("spin%d", i))) // 0.4 s in all
		if prev != nil {
			o.With(dag.After(prev))
		}
		prev = o
	}
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph)
	require.NoError(t, err)
	s, err := executor.Open(context.Background(), b, p)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Run(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 150*time.Millisecond, "Run returns promptly once its context ends")
	// The session runs again: the abandoned work is waited for first.
	start = time.Now()
	require.NoError(t, s.Run(context.Background()))
	assert.Greater(t, time.Since(start), 400*time.Millisecond)
	require.NoError(t, s.Close())
	assertReleased(t, b, "")
}

// TestNoLeaks runs a graph with temporaries, host memory and host steps to
// success, to failure and to cancellation, and checks that the backend
// holds nothing afterwards and the device has its memory back.
func TestNoLeaks(t *testing.T) {
	b := gpuBackend(t)
	probe, err := newMemProbe(b.drv)
	require.NoError(t, err)
	defer probe.close()

	build := func(fail bool) *dag.Graph {
		g := dag.New()
		x := g.Buffer("x", 64<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		tmp := g.Buffer("tmp", 64<<20, dag.OnDevice(0), dag.Of(dag.F32), dag.Temporary())
		h := g.Buffer("h", 1<<20, dag.PinnedHost(), dag.Zeros())
		p := g.Buffer("p", 1<<20, dag.PageableHost(), dag.Zeros())
		g.Copy(tmp.All(), x.All())
		g.Launch(dag.Scale, dag.Grid1(256), dag.Grid1(256), tmp, float32(2))
		g.Copy(h.All(), tmp.Slice(0, 1<<20))
		g.Host(func(ctx context.Context, mem [][]byte) error {
			copy(mem[1], mem[0])
			if fail {
				return errors.New("planned failure")
			}
			return nil
		}, dag.In(h.All()), dag.Out(p.All()))
		for i := range 50 {
			g.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 1000.0, dag.Name(fmt.Sprintf("spin%d", i)), dag.After(g.Launch(dag.Empty, dag.Grid1(1), dag.Grid1(1), dag.Name(fmt.Sprintf("e%d", i)))))
		}
		graph, err := g.Build()
		require.NoError(t, err)
		return graph
	}
	// A first run settles what the context keeps for good (its loaded
	// kernels' local memory, say) before the baseline is taken.
	warm := build(false)
	runGraph(t, b, warm, 0)
	before, err := probe.free()
	require.NoError(t, err)
	// The driver may keep freed memory for reuse, so free memory need not
	// drop when the backend allocates what an earlier one freed; a leak
	// shows as memory that a later cycle must take anew. Make sure the
	// probe sees a fresh allocation at all.
	extra, err := b.drv.memAlloc(probe.ctx, 1<<30)
	require.NoError(t, err)
	seen, err := probe.free()
	require.NoError(t, err)
	require.NoError(t, b.drv.memFree(probe.ctx, extra))
	require.Less(t, seen, before-(1<<29), "cuMemGetInfo shows a 1 GiB allocation")
	before, err = probe.free()
	require.NoError(t, err)
	cases := []struct {
		name    string
		fail    bool
		timeout time.Duration
		check   func(error)
	}{
		{"success", false, time.Minute, func(err error) { assert.NoError(t, err) }},
		{"failure", true, time.Minute, func(err error) {
			var oe *dag.OpError
			assert.ErrorAs(t, err, &oe)
		}},
		{"cancelled", false, 5 * time.Millisecond, func(err error) { assert.ErrorIs(t, err, context.DeadlineExceeded) }},
	}
	for _, c := range cases {
		g := build(c.fail)
		p, err := planner.New(g)
		require.NoError(t, err)
		se := openSession(t, b, g)
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.check(runPlan(ctx, se, p, true))
		cancel()
		require.NoError(t, se.Close(), c.name)
		assertReleased(t, b, fmt.Sprintf("%s", c.name))
		after, err := probe.free()
		require.NoError(t, err)
		assert.InDelta(t, float64(before), float64(after), 4<<20, "%s: free device memory before %d, after %d", c.name, before, after)
	}
}

// TestAsyncFault runs a kernel that writes through a null pointer in a
// child process (the fault ruins the context for the rest of the process)
// and checks that Sync names it.
func TestAsyncFault(t *testing.T) {
	if os.Getenv("DAGRUN_FAULT_CHILD") != "1" {
		gpuBackend(t) // skip here without a GPU
		cmd := exec.Command(os.Args[0], "-test.run=^TestAsyncFault$", "-test.v")
		cmd.Env = append(os.Environ(), "DAGRUN_FAULT_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "FAULT op \"bad\"")
		return
	}
	// Not gpuBackend: closing after the fault reports the ruined context.
	b, err := New(CacheDir(t.TempDir()))
	require.NoError(t, err)
	g := dag.New()
	// The address comes in at run time, so the compiler cannot drop the store.
	k := g.Kernel(&dag.Kernel{Name: "bad", Source: dag.CUDAC,
		Params: []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.Read}, {Name: "addr", Kind: dag.I64Param}},
		Code:   `extern "C" __global__ void bad(const float* x, long long addr) { ((volatile float*)addr)[threadIdx.x] = x[0]; }`})
	x := g.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
	before := g.Launch(dag.Empty, dag.Grid1(1), dag.Grid1(1), dag.Name("before"))
	g.Launch(k, dag.Grid1(1), dag.Grid1(32), x, int64(16), dag.Name("bad"), dag.After(before)) // one stream
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph)
	require.NoError(t, err)
	se := openSession(t, b, graph)
	err = runPlan(context.Background(), se, p, true)
	require.Error(t, err)
	fmt.Println("FAULT", err)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 700, ce.Code) // CUDA_ERROR_ILLEGAL_ADDRESS
	se.Close()                    // errors expected: the fault ruined the context
	assertReleased(t, b, "")
	b.Close()
	assert.Zero(t, b.Live().Total(), "%+v", b.Live())
}

func TestKernelErrors(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	tests := []struct {
		name string
		k    *dag.Kernel
		want string
	}{
		{"syntax", &dag.Kernel{Name: "broken", Source: dag.CUDAC, Code: `extern "C" __global__ void broken() { int x = ; }`}, "expected an expression"},
		{"entry", &dag.Kernel{Name: "missing", Source: dag.CUDAC, Code: `extern "C" __global__ void other() {}`}, "has no entry"},
		{"file", &dag.Kernel{Name: "nofile", Source: dag.PTX, Path: "/nonexistent/k.ptx"}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := dag.New()
			k := g.Kernel(tt.k)
			g.Launch(k, dag.Grid1(1), dag.Grid1(1))
			graph, err := g.Build()
			require.NoError(t, err)
			_, err = b.Open(context.Background(), graph)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), tt.k.Name)
			assertReleased(t, b, "")
		})
	}
	// A CUDA C kernel that works, with scalars of each type.
	g := dag.New()
	k := g.Kernel(&dag.Kernel{Name: "mix", Source: dag.CUDAC, Params: []dag.Param{
		{Name: "x", Kind: dag.BufferParam, Mode: dag.Write}, {Name: "a", Kind: dag.I32Param}, {Name: "b", Kind: dag.I64Param},
		{Name: "c", Kind: dag.F32Param}, {Name: "d", Kind: dag.F64Param}},
		Code: `extern "C" __global__ void mix(double* x, int a, long long b, float c, double d) { x[0] = a; x[1] = b; x[2] = c; x[3] = d; }`})
	x := g.Buffer("x", 32, dag.OnDevice(0), dag.Of(dag.F64), dag.Zeros())
	g.Launch(k, dag.Grid1(1), dag.Grid1(1), x, int32(-7), int64(1)<<40, float32(0.5), 2.25)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph)
	require.NoError(t, err)
	se := openSession(t, b, graph)
	defer se.Close()
	require.NoError(t, runPlan(context.Background(), se, p, true))
	got, err := se.Read(x)
	require.NoError(t, err)
	want := append(append(append(dag.ElemBytes(dag.F64, -7), dag.ElemBytes(dag.F64, 1<<40)...), dag.ElemBytes(dag.F64, 0.5)...), dag.ElemBytes(dag.F64, 2.25)...)
	assert.Equal(t, want, got)
}
