//go:build cgo

package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// Stream tasks and callers' events on the GPU. They skip without a
// driver and fail instead with DAGRUN_REQUIRE_GPU=1 (gpuBackend).

func allWords(t *testing.T, data []byte, want uint32) {
	t.Helper()
	require.Zero(t, len(data)%4)
	bad := 0
	for i := 0; i < len(data); i += 4 {
		if binary.LittleEndian.Uint32(data[i:]) != want {
			bad++
		}
	}
	assert.Zero(t, bad, "%d of %d words differ from %#x", bad, len(data)/4, want)
}

func TestStreamTasksGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	const n = 1 << 20 // bytes
	var calls atomic.Int32
	var seen dag.TaskStream
	// fill sets the task's view (its address is the view's, not the
	// buffer's) to v.
	fill := func(v uint32, words int) dag.TaskFunc {
		return func(_ context.Context, on dag.TaskStream) error {
			calls.Add(1)
			seen = on
			return b.MemsetD32(on, on.Addrs[0], v, words)
		}
	}
	g := dag.New()
	x := g.Buffer("x", n, dag.OnDevice(0), dag.Of(dag.U8), dag.Zeros())
	x2 := g.Buffer("x2", n, dag.OnDevice(0), dag.Of(dag.U8), dag.Zeros())
	tmp := g.Buffer("tmp", n, dag.OnDevice(0), dag.Temporary())
	out := g.Buffer("out", n, dag.PinnedHost(), dag.Zeros())
	g.Task(fill(0x40400000, n/8), dag.Out(x.Slice(n/2, n/2)), dag.Name("fill x"))
	g.Alloc(tmp) // a device temporary starts undefined: the task sets all of it
	g.Task(fill(7, n/4), dag.Out(tmp.All()), dag.Name("fill tmp"))
	g.Copy(out.All(), tmp.All())
	g.Free(tmp)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(2))
	require.NoError(t, err)
	s, err := executor.Open(ctx, b, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	check := func() {
		xs, err := s.Read(x)
		require.NoError(t, err)
		allWords(t, xs[:n/2], 0)
		allWords(t, xs[n/2:], 0x40400000)
		os, err := s.Read(out)
		require.NoError(t, err)
		allWords(t, os, 7)
	}
	require.NoError(t, s.Run(ctx))
	check()
	assert.Equal(t, int32(2), calls.Load())
	assert.NotZero(t, seen.Handle)
	assert.Equal(t, 0, seen.Device)

	// Captured once; each replay repeats the enqueued memsets.
	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(4), calls.Load(), "a capture calls each task once")
	for range 3 {
		require.NoError(t, s.Write(x, make([]byte, n)))
		require.NoError(t, gr.Run(ctx))
		check()
	}
	assert.Equal(t, int32(4), calls.Load(), "replays do not call the tasks")

	// A Rebind recaptures: the tasks are called again, with x2's address.
	require.NoError(t, gr.Update(ctx, executor.Rebind(x, x2)))
	assert.Equal(t, int32(6), calls.Load())
	require.NoError(t, gr.Run(ctx))
	x2s, err := s.Read(x2)
	require.NoError(t, err)
	allWords(t, x2s[:n/2], 0)
	allWords(t, x2s[n/2:], 0x40400000)
}

func TestStreamTaskErrorGPU(t *testing.T) {
	b := gpuBackend(t)
	tests := []struct {
		name string
		fn   dag.TaskFunc
		want string
	}{
		{"error", func(context.Context, dag.TaskStream) error { return errors.New("CUBLAS_STATUS_NOT_SUPPORTED") }, "stream task: CUBLAS_STATUS_NOT_SUPPORTED"},
		{"panic", func(context.Context, dag.TaskStream) error { panic("oops") }, "stream task panicked: oops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := dag.New()
			x := g.Buffer("x", 64, dag.OnDevice(0), dag.Zeros())
			g.Fill(x.All(), 1, dag.Name("fill"))
			g.Task(tt.fn, dag.InOut(x.All()), dag.Name("library call"))
			graph, err := g.Build()
			require.NoError(t, err)
			p, err := planner.New(graph)
			require.NoError(t, err)
			_, err = executor.Execute(context.Background(), b, p)
			require.Error(t, err)
			var oe *dag.OpError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, "library call", oe.Op)
			assert.Contains(t, err.Error(), tt.want)
			live := b.Live()
			assert.Zero(t, live.Total()-live.Contexts-live.Modules-live.Kept, "the failed run leaks nothing: %+v", live)
		})
	}
}

// A caller's own stream (made here through the package's internals) orders
// with a dagrun run both ways.
func TestCallerStreamGPU(t *testing.T) {
	b := gpuBackend(t)
	ctx := context.Background()
	const n = 64 << 20
	g := dag.New()
	x := g.Buffer("x", n, dag.OnDevice(0), dag.Zeros())
	y := g.Buffer("y", n, dag.OnDevice(0), dag.Zeros())
	last := g.Buffer("last", 4, dag.PinnedHost(), dag.Zeros())
	g.Copy(last.All(), x.Slice(n-4, 4))
	g.Fill(y.Slice(0, n/2), 3)
	g.Fill(y.Slice(n/2, n/2), 5)
	graph, err := g.Build()
	require.NoError(t, err)
	p, err := planner.New(graph, planner.Streams(3))
	require.NoError(t, err)
	s, err := executor.Open(ctx, b, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	se := s.Device().(*Session)
	d, err := se.hold.device(0)
	require.NoError(t, err)
	drv := se.drv

	cs, err := drv.streams.create(d.ctx, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, drv.streams.destroy(d.ctx, cs)) }()
	after, err := drv.events.create(d.ctx, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, drv.events.destroy(d.ctx, after)) }()
	done, err := drv.events.create(d.ctx, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, drv.events.destroy(d.ctx, done)) }()
	caller := dag.TaskStream{Handle: uintptr(unsafe.Pointer(cs)), Device: 0}
	xAddr := uintptr(se.hold.bufs[x.ID].dptr)
	yAddr := uintptr(se.hold.bufs[y.ID].dptr)

	for _, replay := range []bool{false, true} {
		// Caller first: many slow memsets of x, the last writes 9; dagrun
		// then reads x's last word.
		for i := range 40 {
			require.NoError(t, b.MemsetD32(caller, xAddr, uint32(100+i), n/4))
		}
		require.NoError(t, b.MemsetD32(caller, xAddr, 9, n/4))
		require.NoError(t, drv.streams.recordExternal(d.ctx, cs, uintptr(unsafe.Pointer(after))))
		ext := executor.External{After: uintptr(unsafe.Pointer(after)), Done: uintptr(unsafe.Pointer(done))}
		if replay {
			gr, err := s.Capture(ctx)
			require.NoError(t, err)
			require.NoError(t, gr.LaunchAfter(ctx, ext))
		} else {
			require.NoError(t, s.Enqueue(ctx, ext))
		}
		// dagrun first: the caller's stream waits for done, then clears y.
		require.NoError(t, drv.streams.waitExternal(d.ctx, cs, uintptr(unsafe.Pointer(done))))
		require.NoError(t, b.MemsetD32(caller, yAddr, 0, n/4))
		require.NoError(t, drv.streams.sync(d.ctx, cs))
		require.NoError(t, s.Sync(ctx))
		lw, err := s.Read(last)
		require.NoError(t, err)
		assert.Equal(t, uint32(9), binary.LittleEndian.Uint32(lw), "replay %v: dagrun read x before the caller's event", replay)
		ys, err := s.Read(y)
		require.NoError(t, err)
		allWords(t, ys, 0) // dagrun's fills came before the caller's clear
	}
}
