package cpu_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
)

// double is a task that writes 2*x into y: on the host's stream it does
// the work itself, on the views' bytes.
func double(_ context.Context, on dag.TaskStream) error {
	if !on.Host {
		return errors.New("double runs on the host only")
	}
	in, out := f32s(on.Mem[0]), make([]float32, len(on.Mem[0])/4)
	for i, v := range in {
		out[i] = 2 * v
	}
	copy(on.Mem[1], f32Bytes(out...))
	return nil
}

// TestTaskRunsItsFunction: the cpu backend calls a task's own function,
// with the host's stream and the bytes of its views.
func TestTaskRunsItsFunction(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fn      dag.TaskFunc
		want    []float32
		wantErr string
	}{
		{name: "the function runs over the views", fn: double, want: []float32{2, 4, 6, 8}},
		{name: "error names the task", fn: func(context.Context, dag.TaskStream) error { return boom }, wantErr: `op "double": boom`},
		{name: "panic is an error", fn: func(context.Context, dag.TaskStream) error { panic("bad") }, wantErr: "stream task panicked: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, func(b *dag.Builder) {
				x := b.Buffer("x", 16, dag.OnDevice(0), dag.Contents(f32Bytes(1, 2, 3, 4)))
				y := b.Buffer("y", 16, dag.OnDevice(0), dag.Zeros())
				// A view inside y: the slices alias the views, not the buffers.
				b.Task(tt.fn, dag.In(x.Slice(0, 8)), dag.Out(y.Slice(8, 8)), dag.Name("double"), dag.RunsOnCPU())
				b.Task(double, dag.In(x.Slice(8, 8)), dag.Out(y.Slice(0, 8)), dag.Name("tail"), dag.RunsOnCPU())
			})
			out, err := executor.Execute(context.Background(), cpu.New(), plan(t, g, 2))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				_, ok := errors.AsType[*dag.OpError](err)
				assert.True(t, ok, "a *dag.OpError: %v", err)
				return
			}
			require.NoError(t, err)
			for b, data := range out {
				if b.Name == "y" {
					assert.Equal(t, []float32{tt.want[2], tt.want[3], tt.want[0], tt.want[1]}, f32s(data))
				}
			}
		})
	}
}

// TestTaskStreamOnCPU: what the function gets on the cpu backend: the
// host's stream, no handle or device addresses, the op's device, and one
// slice per view of the view's size.
func TestTaskStreamOnCPU(t *testing.T) {
	var got dag.TaskStream
	var sizes []int
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 16, dag.OnDevice(0), dag.Zeros())
		y := b.Buffer("y", 8, dag.OnDevice(0), dag.Zeros())
		b.Task(func(_ context.Context, on dag.TaskStream) error {
			got = on
			for _, m := range on.Mem { // the slices are not the task's to keep
				sizes = append(sizes, len(m))
			}
			return nil
		}, dag.In(x.Slice(4, 12)), dag.Out(y.All()), dag.RunsOnCPU())
	})
	_, err := executor.Execute(context.Background(), cpu.New(), plan(t, g, 1))
	require.NoError(t, err)
	assert.True(t, got.Host)
	assert.Zero(t, got.Handle)
	assert.Nil(t, got.Addrs)
	assert.Equal(t, 0, got.Device)
	assert.Equal(t, []int{12, 8}, sizes)
}

func TestTaskNotOnCPUIsRefused(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 16, dag.OnDevice(0), dag.Zeros())
		b.Task(func(context.Context, dag.TaskStream) error { return nil }, dag.Out(x.All()), dag.Name("library call"))
	})
	_, err := cpu.New().Open(context.Background(), g)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `op "library call"`)
	assert.Contains(t, err.Error(), "dag.RunsOnCPU()")
}

// A captured graph calls the function at every replay, as a CUDA replay
// repeats the work the task enqueued.
func TestTaskReplays(t *testing.T) {
	var calls atomic.Int32
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(1))
		b.Task(func(_ context.Context, on dag.TaskStream) error {
			calls.Add(1)
			v := f32s(on.Mem[0])
			copy(on.Mem[0], f32Bytes(v[0]+1))
			return nil
		}, dag.InOut(x.All()), dag.Name("grow"), dag.RunsOnCPU())
	})
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), plan(t, g, 1))
	require.NoError(t, err)
	defer s.Close()
	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	assert.Zero(t, calls.Load(), "capture runs nothing on the cpu backend")
	for range 3 {
		require.NoError(t, gr.Run(ctx))
	}
	assert.Equal(t, int32(3), calls.Load())
	data, err := s.Read(g.Buffers[0])
	require.NoError(t, err)
	assert.Equal(t, []float32{4}, f32s(data))
}

// Rebind: the function of the recaptured graph works on the new buffer.
func TestTaskRebind(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 16, dag.OnDevice(0), dag.Contents(f32Bytes(1, 2, 3, 4)))
		b.Buffer("x2", 16, dag.OnDevice(0), dag.Contents(f32Bytes(5, 6, 7, 8)))
		y := b.Buffer("y", 16, dag.OnDevice(0), dag.Zeros())
		b.Task(double, dag.In(x.All()), dag.Out(y.All()), dag.Name("double"), dag.RunsOnCPU())
	})
	x, x2, y := g.Buffers[0], g.Buffers[1], g.Buffers[2]
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), plan(t, g, 1))
	require.NoError(t, err)
	defer s.Close()
	gr, err := s.Capture(ctx)
	require.NoError(t, err)
	for _, c := range []struct {
		from *dag.Buffer
		want []float32
	}{{x, []float32{2, 4, 6, 8}}, {x2, []float32{10, 12, 14, 16}}} {
		require.NoError(t, gr.Update(ctx, executor.Rebind(x, c.from)))
		require.NoError(t, gr.Run(ctx))
		data, err := s.Read(y)
		require.NoError(t, err)
		assert.Equal(t, c.want, f32s(data), "from %s", c.from.Name)
	}
}

// A wait for the caller's second record is not over at the first.
func TestExternalWaitForLaterRecord(t *testing.T) {
	be := cpu.New()
	var ran atomic.Bool
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 4, dag.OnDevice(0), dag.Zeros())
		b.Task(func(context.Context, dag.TaskStream) error { ran.Store(true); return nil }, dag.Out(x.All()), dag.Name("t"), dag.RunsOnCPU())
	})
	ctx := context.Background()
	s, err := executor.Open(ctx, be, plan(t, g, 1))
	require.NoError(t, err)
	defer s.Close()
	ev := be.NewEvent()
	defer ev.Close()
	first := ev.RecordPending()
	second := ev.RecordPending()
	require.NoError(t, s.Enqueue(ctx, executor.External{After: ev.Handle()}))
	first()
	time.Sleep(20 * time.Millisecond)
	assert.False(t, ran.Load(), "ran after the first of two records")
	second()
	require.NoError(t, s.Sync(ctx))
	assert.True(t, ran.Load())
}
