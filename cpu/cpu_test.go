package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/dagtest"
)

func TestOps(t *testing.T) {
	one, four := dag.Grid1(1), dag.Grid1(4)
	tests := []struct {
		name    string
		declare func(b *dag.Builder) // declares a buffer "out"
		want    []byte
	}{
		{"iota", func(b *dag.Builder) {
			b.Launch(dag.Iota, one, four, b.Buffer("out", 16, dag.Zeros()), 2.5)
		}, f32Bytes(2.5, 3.5, 4.5, 5.5)},
		{"iota on a view", func(b *dag.Builder) {
			out := b.Buffer("out", 24, dag.Zeros())
			b.Launch(dag.Iota, one, four, out.Slice(8, 8), 1.0)
		}, f32Bytes(0, 0, 1, 2, 0, 0)},
		{"scale", func(b *dag.Builder) {
			out := b.Buffer("out", 12, dag.Contents(f32Bytes(1, 2, 3)))
			b.Launch(dag.Scale, four, four, out, -2.0)
		}, f32Bytes(-2, -4, -6)},
		{"axpy", func(b *dag.Builder) {
			y := b.Buffer("out", 12, dag.Value(1))
			x := b.Buffer("x", 12, dag.Contents(f32Bytes(1, 2, 3)))
			b.Launch(dag.Axpy, one, one, y, x, 0.5)
		}, f32Bytes(1.5, 2, 2.5)},
		{"axpy rounds the product before the sum", func(b *dag.Builder) {
			// A fused multiply-add keeps 1+2^-12 squared exactly and gives
			// 2^-24 here; separate roundings give 0, as on CUDA.
			const e = 1.0 / (1 << 12)
			y := b.Buffer("out", 4, dag.Contents(f32Bytes(-(1 + 2*e))))
			x := b.Buffer("x", 4, dag.Contents(f32Bytes(1+e)))
			b.Launch(dag.Axpy, one, one, y, x, 1+e)
		}, f32Bytes(0)},
		{"add", func(b *dag.Builder) {
			c := b.Buffer("out", 8, dag.Zeros())
			x := b.Buffer("a", 8, dag.Contents(f32Bytes(1, 2)))
			y := b.Buffer("b", 8, dag.Contents(f32Bytes(10, 20)))
			b.Launch(dag.Add, one, four, c, x, y)
		}, f32Bytes(11, 22)},
		{"reduce_sum accumulates in f64", func(b *dag.Builder) {
			out := b.Buffer("out", 8, dag.Value(7))
			in := b.Buffer("in", 16, dag.Contents(f32Bytes(1e8, 1, -1e8, 1)))
			b.Launch(dag.ReduceSum, one, four, out, in)
		}, f32Bytes(2, 7)},
		{"matmul", func(b *dag.Builder) {
			c := b.Buffer("out", 16, dag.Zeros())
			x := b.Buffer("a", 24, dag.Contents(f32Bytes(1, 2, 3, 4, 5, 6)))
			y := b.Buffer("b", 24, dag.Contents(f32Bytes(7, 8, 9, 10, 11, 12)))
			b.Launch(dag.Matmul, one, four, c, x, y, 2, 2, 3)
		}, f32Bytes(58, 64, 139, 154)},
		{"empty", func(b *dag.Builder) {
			b.Buffer("out", 4, dag.Value(3))
			b.Launch(dag.Empty, one, one)
		}, f32Bytes(3)},
		{"spin", func(b *dag.Builder) {
			out := b.Buffer("out", 4, dag.Value(3))
			b.Launch(dag.Spin, one, one, 50.0)
			b.Fill(out.All(), 4)
		}, f32Bytes(4)},
		{"fill f32 view", func(b *dag.Builder) {
			out := b.Buffer("out", 12, dag.Zeros())
			b.Fill(out.Slice(4, 8), -1.5)
		}, f32Bytes(0, -1.5, -1.5)},
		{"fill i32", func(b *dag.Builder) {
			b.Fill(b.Buffer("out", 8, dag.Of(dag.I32), dag.Zeros()).All(), -3)
		}, []byte{0xfd, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0xff}},
		{"fill u8 view", func(b *dag.Builder) {
			out := b.Buffer("out", 4, dag.Of(dag.U8), dag.Zeros())
			b.Fill(out.Slice(1, 2), 9)
		}, []byte{0, 9, 9, 0}},
		{"fill f64", func(b *dag.Builder) {
			b.Fill(b.Buffer("out", 8, dag.Of(dag.F64), dag.Zeros()).All(), 1.5)
		}, dag.ElemBytes(dag.F64, 1.5)},
		{"memset2d u8 rows, gaps kept", func(b *dag.Builder) {
			out := b.Buffer("out", 10, dag.Of(dag.U8), dag.Zeros())
			b.Memset2D(out.Slice(1, 9), dag.Memset2DSpec{Rows: 3, Width: 2, Pitch: 3}, 5)
		}, []byte{0, 5, 5, 0, 5, 5, 0, 5, 5, 0}},
		{"memset2d i32", func(b *dag.Builder) {
			out := b.Buffer("out", 16, dag.Of(dag.I32), dag.Zeros())
			b.Memset2D(out.All(), dag.Memset2DSpec{Rows: 2, Width: 1, Pitch: 8}, -3)
		}, []byte{0xfd, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
		{"copy between views", func(b *dag.Builder) {
			src := b.Buffer("src", 8, dag.Contents([]byte{1, 2, 3, 4, 5, 6, 7, 8}))
			out := b.Buffer("out", 6, dag.Zeros())
			b.Copy(out.Slice(2, 4), src.Slice(4, 4))
		}, []byte{0, 0, 5, 6, 7, 8}},
		{"host step", func(b *dag.Builder) {
			out := b.Buffer("out", 4, dag.PinnedHost(), dag.Contents([]byte{1, 2, 3, 4}))
			b.Host(func(_ context.Context, mem [][]byte) error {
				for i := range mem[0] {
					mem[0][i] *= 2
				}
				return nil
			}, dag.InOut(out.Slice(1, 2)))
		}, []byte{1, 4, 6, 4}},
		{"temporary", func(b *dag.Builder) {
			tmp := b.Buffer("tmp", 8, dag.Temporary())
			out := b.Buffer("out", 8, dag.Zeros())
			b.Launch(dag.Iota, one, one, tmp, 5.0)
			b.Launch(dag.Scale, one, one, tmp, 2.0)
			b.Copy(out.All(), tmp.All())
		}, f32Bytes(10, 12)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, tt.declare)
			for _, streams := range []int{1, 4} {
				got := execute(t, plan(t, g, streams))
				assert.Equal(t, tt.want, got["out"], "streams=%d", streams)
			}
		})
	}
}

// TestHazards runs each pair of conflicting ops on different streams with
// random delays, so any missing wait shows as a wrong result.
func TestHazards(t *testing.T) {
	one := dag.Grid1(1)
	tests := []struct {
		name    string
		declare func(b *dag.Builder)
		want    map[string][]byte
	}{
		{"read after write", func(b *dag.Builder) {
			x := b.Buffer("x", 8, dag.Zeros())
			out := b.Buffer("out", 8, dag.Zeros())
			b.Fill(x.All(), 1)
			b.Launch(dag.Scale, one, one, x, 3.0)
			b.Copy(out.All(), x.All())
		}, map[string][]byte{"x": f32Bytes(3, 3), "out": f32Bytes(3, 3)}},
		{"write after read", func(b *dag.Builder) {
			x := b.Buffer("x", 8, dag.Value(5))
			out := b.Buffer("out", 8, dag.Zeros())
			b.Copy(out.All(), x.All())
			b.Fill(x.All(), 7)
		}, map[string][]byte{"x": f32Bytes(7, 7), "out": f32Bytes(5, 5)}},
		{"write after write", func(b *dag.Builder) {
			x := b.Buffer("x", 8, dag.Zeros())
			b.Fill(x.All(), 1)
			b.Fill(x.All(), 2)
		}, map[string][]byte{"x": f32Bytes(2, 2)}},
		{"overlapping views", func(b *dag.Builder) {
			x := b.Buffer("x", 16, dag.Zeros())
			b.Fill(x.Slice(0, 12), 1)
			b.Fill(x.Slice(4, 12), 2)
			b.Launch(dag.Scale, one, one, x.Slice(0, 8), 3.0)
		}, map[string][]byte{"x": f32Bytes(3, 6, 2, 2)}},
		{"free after readers", func(b *dag.Builder) {
			tmp := b.Buffer("tmp", 8, dag.Temporary())
			x := b.Buffer("x", 8, dag.Zeros())
			y := b.Buffer("y", 8, dag.Zeros())
			b.Alloc(tmp)
			b.Fill(tmp.All(), 4)
			b.Copy(x.All(), tmp.All())
			b.Copy(y.All(), tmp.All())
			b.Launch(dag.Scale, one, one, x, 2.0)
			b.Free(tmp)
		}, map[string][]byte{"x": f32Bytes(8, 8), "y": f32Bytes(4, 4)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, tt.declare)
			for streams := 2; streams <= 3; streams++ {
				p := handPlan(t, g, streams, func(op *dag.Op) int { return op.ID % streams })
				for seed := range int64(10) {
					got := execute(t, p, cpu.Delays(seed, 200*time.Microsecond), cpu.Workers(1+int(seed)%3))
					for name, want := range tt.want {
						assert.Equal(t, want, got[name], "%s, streams=%d seed=%d", name, streams, seed)
					}
				}
			}
		})
	}
}

// TestDelaysDoNotChangeResults runs random graphs planned onto 1 to 8
// streams with random pauses before every op, and compares every
// persistent buffer with a sequential run of the same graph.
func TestDelaysDoNotChangeResults(t *testing.T) {
	graphs := 300
	if testing.Short() {
		graphs = 60
	}
	for i := range graphs {
		cfg := dagtest.Config{Ops: 30, Buffers: 5, Seed: int64(i), Ranges: i%2 == 0, Priorities: i%3 != 0,
			Temporaries: i%4 != 0, HostBuffers: i%5 != 0, Devices: 1 + i%2, After: i%3 == 1, Memset2D: i%4 == 3}
		g := dagtest.Random(cfg)
		want := execute(t, plan(t, g, 1))
		streams := 1 + i%8
		got := execute(t, plan(t, g, streams), cpu.Delays(int64(i), 50*time.Microsecond), cpu.Workers(1+i%4))
		if !assert.Equal(t, want, got, "graph %+v on %d streams", cfg, streams) {
			return
		}
	}
}

func TestOpErrorNamesTheOp(t *testing.T) {
	bad := errors.New("bad input")
	var ran []string
	var mu sync.Mutex
	note := func(name string) dag.HostFunc {
		return func(context.Context, [][]byte) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, name)
			return nil
		}
	}
	tests := []struct {
		name string
		fn   dag.HostFunc
		want string
	}{
		{"error", func(context.Context, [][]byte) error { return bad }, "bad input"},
		{"panic", func(context.Context, [][]byte) error { panic("oops") }, "host step panicked: oops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran = nil
			g := build(t, func(b *dag.Builder) {
				h := b.Buffer("h", 4, dag.PinnedHost(), dag.Zeros())
				b.Host(note("first"), dag.InOut(h.All()), dag.Name("first"))
				b.Host(tt.fn, dag.InOut(h.All()), dag.Name("boom"))
				b.Host(note("after"), dag.InOut(h.All()), dag.Name("after"))
			})
			s, err := executor.Open(context.Background(), cpu.New(), plan(t, g, 2))
			require.NoError(t, err)
			for range 2 {
				err = s.Run(context.Background())
				var opErr *dag.OpError
				require.ErrorAs(t, err, &opErr)
				assert.Equal(t, "boom", opErr.Op)
				assert.ErrorContains(t, err, tt.want)
			}
			assert.Equal(t, []string{"first", "first"}, ran, "ops after the failed one are skipped")
			require.NoError(t, s.Close())
			require.NoError(t, s.Close())
		})
	}
}

func TestCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 4, dag.Zeros())
		h := b.Buffer("h", 4, dag.PinnedHost(), dag.Zeros())
		spin := b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(1), 10e6, dag.Name("spin"))
		b.Fill(x.All(), 1, dag.After(spin))
		b.Host(func(ctx context.Context, _ [][]byte) error {
			<-ctx.Done() // a host step that runs until it is told to stop
			return ctx.Err()
		}, dag.InOut(h.All()), dag.Name("hang"))
		b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(1), 10e6, dag.Name("spin2"), dag.High)
	})
	p := handPlan(t, g, 3, func(op *dag.Op) int { return op.ID % 3 })
	s, err := executor.Open(context.Background(), cpu.New(cpu.Workers(2)), p)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	start := time.Now()
	err = s.Run(ctx)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	requireNoLeak(t, before)
}

func TestRunTwiceCarriesState(t *testing.T) {
	one := dag.Grid1(1)
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 8, dag.Value(1))
		y := b.Buffer("y", 8, dag.Zeros())
		tmp := b.Buffer("tmp", 8, dag.Temporary())
		b.Fill(tmp.All(), 2)
		b.Launch(dag.Axpy, one, one, x, tmp, 1.0)
		b.Launch(dag.Axpy, one, one, y, tmp, 1.0)
		b.Launch(dag.Scale, one, one, x, 2.0)
	})
	for _, streams := range []int{1, 4} {
		p := plan(t, g, streams)
		s, err := executor.Open(context.Background(), cpu.New(cpu.Delays(3, 20*time.Microsecond)), p, executor.WithTiming())
		require.NoError(t, err)
		for _, want := range []struct{ x, y []byte }{{f32Bytes(6, 6), f32Bytes(2, 2)}, {f32Bytes(16, 16), f32Bytes(4, 4)}} {
			require.NoError(t, s.Run(context.Background()))
			x, err := s.Read(g.Buffers[0])
			require.NoError(t, err)
			y, err := s.Read(g.Buffers[1])
			require.NoError(t, err)
			assert.Equal(t, want.x, x)
			assert.Equal(t, want.y, y)
			assert.Len(t, s.Spans(), len(g.Ops), "one span per op, every run")
		}
		require.NoError(t, s.Close())
	}
}

func TestSpans(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 64, dag.Zeros())
		b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(1), x, 0.0)
		b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(1), 200.0)
		b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0)
	})
	p := plan(t, g, 2)
	s, err := executor.Open(context.Background(), cpu.New(), p, executor.WithTiming())
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Run(context.Background()))
	spans := s.Spans()
	require.Len(t, spans, len(g.Ops))
	seen := map[int]bool{}
	for _, sp := range spans {
		assert.False(t, seen[sp.Op], "op %d timed twice", sp.Op)
		seen[sp.Op] = true
		assert.EqualValues(t, p.OpStream[sp.Op], sp.Stream)
		assert.GreaterOrEqual(t, sp.Start, time.Duration(0))
		assert.GreaterOrEqual(t, sp.End, sp.Start)
		if g.Ops[sp.Op].Launch.Kernel == dag.Spin {
			assert.GreaterOrEqual(t, sp.End-sp.Start, 200*time.Microsecond)
		}
	}

	plain, err := executor.Open(context.Background(), cpu.New(), p)
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.Run(context.Background()))
	assert.Nil(t, plain.Spans(), "no timing unless asked for")
}

// TestPriorities shows that with one worker, the ready stream of higher
// priority runs first, and takes the worker from a lower one at the next
// op boundary. Host steps hold the worker until the test lets them go, so
// the order is deterministic.
func TestPriorities(t *testing.T) {
	var order []string
	var mu sync.Mutex
	gates := map[string]chan struct{}{} // a step holds its worker until its gate closes
	setGate := func(name string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		gates[name] = make(chan struct{})
		return gates[name]
	}
	started := make(chan string, 16)
	step := func(b *dag.Builder, name string) *dag.Op {
		h := b.Buffer("h."+name, 4, dag.PinnedHost(), dag.Zeros())
		return b.Host(func(context.Context, [][]byte) error {
			started <- name
			mu.Lock()
			gate := gates[name]
			mu.Unlock()
			if gate != nil {
				<-gate
			}
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		}, dag.InOut(h.All()), dag.Name(name))
	}
	ops := map[string]*dag.Op{}
	g := build(t, func(b *dag.Builder) {
		for _, name := range []string{"gate", "low1", "low2", "high1", "high2"} {
			ops[name] = step(b, name)
		}
	})
	const normal, low, high = 0, 1, 2
	b := openSession(t, cpu.New(cpu.Workers(1)), g)
	for _, p := range []dag.Priority{dag.Normal, dag.Low, dag.High} {
		require.NoError(t, b.NewStream(0, p))
	}
	run := func(stream int, name string) { require.NoError(t, b.Run(stream, ops[name])) }

	// The one worker is busy with gate while both other streams fill up.
	gate := setGate("gate")
	run(normal, "gate")
	require.Equal(t, "gate", <-started)
	run(low, "low1")
	run(low, "low2")
	run(high, "high1")
	run(high, "high2")
	close(gate)
	require.NoError(t, b.Sync(context.Background()))
	assert.Equal(t, []string{"gate", "high1", "high2", "low1", "low2"}, order)
	for range 4 { // the starts of the steps after gate
		<-started
	}

	// Now low runs first, and high arrives while it works.
	order = nil
	gate = setGate("low1")
	run(low, "low1")
	run(low, "low2")
	require.Equal(t, "low1", <-started)
	run(high, "high1")
	close(gate)
	require.NoError(t, b.Sync(context.Background()))
	assert.Equal(t, []string{"low1", "high1", "low2"}, order)
}

func TestUnallocatedTemporary(t *testing.T) {
	var alloc, fill, cp, free *dag.Op
	g := build(t, func(b *dag.Builder) {
		tmp := b.Buffer("tmp", 8, dag.Temporary())
		out := b.Buffer("out", 8, dag.Zeros())
		alloc = b.Alloc(tmp, dag.Name("alloc"))
		fill = b.Fill(tmp.All(), 1, dag.Name("fill"))
		cp = b.Copy(out.All(), tmp.All(), dag.Name("copy"))
		free = b.Free(tmp, dag.Name("free"))
	})
	tests := []struct {
		name   string
		ops    []*dag.Op
		failed string
	}{
		{"use before alloc", []*dag.Op{fill}, "fill"},
		{"use after free", []*dag.Op{alloc, fill, free, cp}, "copy"},
		{"free twice", []*dag.Op{alloc, free, free}, "free"},
		{"alloc twice", []*dag.Op{alloc, alloc}, "alloc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openSession(t, cpu.New(), g)
			require.NoError(t, b.NewStream(0, dag.Normal))
			for _, op := range tt.ops {
				require.NoError(t, b.Run(0, op))
			}
			err := b.Sync(context.Background())
			var opErr *dag.OpError
			require.ErrorAs(t, err, &opErr)
			assert.Equal(t, tt.failed, opErr.Op)
			assert.ErrorContains(t, err, "tmp")

			// The backend recovers: a correct run works afterwards.
			for _, op := range []*dag.Op{alloc, fill, cp, free} {
				require.NoError(t, b.Run(0, op))
			}
			require.NoError(t, b.Sync(context.Background()))
			out, err := b.Read(g.Buffers[1])
			require.NoError(t, err)
			assert.Equal(t, f32Bytes(1, 1), out)
		})
	}
}

func TestEventsAcrossRuns(t *testing.T) {
	// Stream 1 waits for stream 0's slow producer, run after run: each
	// run's wait must hold until that run's record, not an earlier one's.
	var seen []int32
	var produced int32
	g := build(t, func(b *dag.Builder) {
		h := b.Buffer("h", 4, dag.PinnedHost(), dag.Zeros())
		b.Host(func(context.Context, [][]byte) error {
			time.Sleep(2 * time.Millisecond)
			produced++
			return nil
		}, dag.InOut(h.All()), dag.Name("produce"))
		b.Host(func(context.Context, [][]byte) error {
			seen = append(seen, produced)
			return nil
		}, dag.In(h.All()), dag.Name("consume"))
	})
	bk := openSession(t, cpu.New(cpu.Workers(2)), g)
	require.NoError(t, bk.NewStream(0, dag.Normal))
	require.NoError(t, bk.NewStream(0, dag.Normal))
	require.NoError(t, bk.NewEvent())
	for range 5 {
		require.NoError(t, bk.Run(0, g.Ops[0]))
		require.NoError(t, bk.Record(0, 0))
		require.NoError(t, bk.Wait(1, 0))
		require.NoError(t, bk.Run(1, g.Ops[1]))
		require.NoError(t, bk.Sync(context.Background()))
	}
	assert.Equal(t, []int32{1, 2, 3, 4, 5}, seen)
}

func TestRefusesCUDAKernels(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		k := b.Kernel(&dag.Kernel{Name: "saxpy", Source: dag.PTX, Path: "saxpy.ptx",
			Params: []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.ReadWrite}}})
		b.Launch(k, dag.Grid1(1), dag.Grid1(32), b.Buffer("x", 4, dag.Zeros()))
	})
	b := cpu.New()
	_, err := b.Open(context.Background(), g)
	require.Error(t, err)
	assert.ErrorContains(t, err, `kernel "saxpy"`)
	assert.ErrorContains(t, err, "--backend cuda")
	require.NoError(t, b.Close())
}

func TestLifecycle(t *testing.T) {
	before := runtime.NumGoroutine()
	g := build(t, func(b *dag.Builder) {
		b.Fill(b.Buffer("x", 4, dag.Zeros()).All(), 1)
	})
	b := cpu.New(cpu.Workers(3))
	_, err := b.Open(context.Background(), nil)
	assert.Error(t, err, "no graph")
	s, err := b.OpenSession(context.Background(), g)
	require.NoError(t, err)
	assert.Error(t, s.NewStream(-1, dag.Normal))
	require.NoError(t, s.NewStream(0, dag.Normal))
	assert.Error(t, s.Run(1, g.Ops[0]), "no such stream")
	assert.Error(t, s.Record(0, 0), "no such event")
	assert.Error(t, s.Run(0, &dag.Op{Name: "stranger"}), "op of another graph")
	_, err = s.Read(&dag.Buffer{Name: "stranger"})
	assert.Error(t, err)
	assert.Equal(t, 1, b.Sessions())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.Error(t, s.Run(0, g.Ops[0]), "closed")
	assert.Zero(t, b.Sessions())
	requireNoLeak(t, before)

	// Sessions are independent: a second one starts afresh.
	s, err = b.OpenSession(context.Background(), g)
	require.NoError(t, err)
	require.NoError(t, s.NewStream(0, dag.Normal))
	require.NoError(t, s.Run(0, g.Ops[0]))
	require.NoError(t, s.Sync(context.Background()))
	x, err := s.Read(g.Buffers[0])
	require.NoError(t, err)
	assert.Equal(t, f32Bytes(1), x)

	// Closing the backend closes what is open on it and refuses more.
	require.NoError(t, b.Close())
	assert.Error(t, s.Run(0, g.Ops[0]), "closed with its backend")
	_, err = b.Open(context.Background(), g)
	assert.Error(t, err, "open on a closed backend")
	require.NoError(t, b.Close())
	requireNoLeak(t, before)
}

// TestZeroBackend: the zero value is a usable backend (it used
// to hang).
func TestZeroBackend(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		b.Fill(b.Buffer("x", 4, dag.Zeros()).All(), 2)
	})
	var b cpu.Backend
	s, err := b.OpenSession(context.Background(), g)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.NewStream(0, dag.Normal))
	require.NoError(t, s.Run(0, g.Ops[0]))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Sync(ctx))
	x, err := s.Read(g.Buffers[0])
	require.NoError(t, err)
	assert.Equal(t, f32Bytes(2), x)
}

// TestCloseWhileRunning closes a backend with work in flight: Close must
// stop the workers without waiting for the work.
func TestCloseWhileRunning(t *testing.T) {
	before := runtime.NumGoroutine()
	g := build(t, func(b *dag.Builder) {
		for i := range 4 {
			b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(1), 10e6, dag.Name(fmt.Sprint("spin", i)))
		}
	})
	b, err := cpu.New().OpenSession(context.Background(), g)
	require.NoError(t, err)
	require.NoError(t, b.NewStream(0, dag.Normal))
	require.NoError(t, b.NewStream(0, dag.High))
	for _, op := range g.Ops {
		require.NoError(t, b.Run(op.ID%2, op))
	}
	time.Sleep(5 * time.Millisecond)
	start := time.Now()
	require.NoError(t, b.Close())
	assert.Less(t, time.Since(start), 2*time.Second)
	requireNoLeak(t, before)
}

// An abandoned run stops within half a second even inside a GEMM that
// takes seconds on the CPU: the GEMM looks at its stop flag between row
// tiles, not only between the matrices of a batch.
func TestCancelStopsLongGemm(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector slows the BLAS too much to time it")
	}
	const m, n, k = 4096, 2048, 2048 // 34 GFLOP: seconds on a few cores
	g := build(t, func(bd *dag.Builder) {
		f32 := dag.Of(dag.F32)
		a := bd.Buffer("a", 4*m*k, f32, dag.Value(1))
		b := bd.Buffer("b", 4*k*n, f32, dag.Value(1))
		c := bd.Buffer("c", 4*m*n, f32, dag.Zeros())
		bd.Gemm(c.All(), a.All(), b.All(), dag.GemmShape{M: m, N: n, K: k})
	})
	p := plan(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan time.Time, 1)
	time.AfterFunc(300*time.Millisecond, func() { canceled <- time.Now(); cancel() })
	_, err := executor.Execute(ctx, cpu.New(), p)
	require.Error(t, err, "the GEMM ended before the cancel: make it larger")
	assert.Less(t, time.Since(<-canceled), 500*time.Millisecond, "time from the cancel to Execute's return")
}
