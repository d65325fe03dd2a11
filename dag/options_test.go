package dag_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// TestOpOptions: every op constructor takes the options of every op, and
// they set what the op says of itself.
func TestOpOptions(t *testing.T) {
	common := func(name string) []dag.OpOption {
		return []dag.OpOption{dag.Name(name), dag.High, dag.OnDevice(0), dag.Cost(time.Millisecond)}
	}
	noop := func(context.Context, [][]byte) error { return nil }
	noTaskFn := func(context.Context, dag.TaskStream) error { return nil }
	tests := []struct {
		name    string
		declare func(b *dag.Builder, x, y, h, flag *dag.Buffer, opts []dag.OpOption) *dag.Op
	}{
		{"fill", func(b *dag.Builder, x, _, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Fill(x.All(), 1, opts...)
		}},
		{"copy", func(b *dag.Builder, x, y, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			b.Fill(x.All(), 1)
			return b.Copy(y.All(), x.All(), opts...)
		}},
		{"launch", func(b *dag.Builder, x, _, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			args := []any{x, 2.0}
			for _, o := range opts {
				args = append(args, o)
			}
			return b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), args...)
		}},
		{"call", func(b *dag.Builder, x, _, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Call(dag.Scale, dag.Grid1(1), dag.Threads(32), dag.Args{"x": x, "alpha": 2}, opts...)
		}},
		{"host", func(b *dag.Builder, _, _, h, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Host(noop, append([]dag.OpOption{dag.InOut(h.All())}, opts...)...)
		}},
		{"task", func(b *dag.Builder, x, _, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Task(noTaskFn, append(opts, dag.InOut(x.All()))...)
		}},
		{"gemm", func(b *dag.Builder, x, y, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Gemm(y.Slice(0, 16), x.Slice(0, 16), x.Slice(16, 16), dag.GemmShape{M: 2, N: 2, K: 2}, opts...)
		}},
		{"memset2d", func(b *dag.Builder, x, _, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Memset2D(x.All(), dag.Memset2DSpec{Rows: 2, Width: 2, Pitch: 16}, 0, opts...)
		}},
		{"while", func(b *dag.Builder, x, _, _, flag *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.While(flag.All(), func(body *dag.Builder) { body.Fill(flag.All(), 0) }, opts...)
		}},
		{"if", func(b *dag.Builder, x, _, _, flag *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.If(flag.All(), func(body *dag.Builder) { body.Fill(x.All(), 0) }, nil, opts...)
		}},
		{"after, with", func(b *dag.Builder, x, _, _, _ *dag.Buffer, opts []dag.OpOption) *dag.Op {
			return b.Fill(x.All(), 1).With(opts...)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			x := b.Array("x", dag.F32, 8, dag.Zeros())
			y := b.Array("y", dag.F32, 8, dag.Zeros())
			h := b.Array("h", dag.F32, 8, dag.PinnedHost(), dag.Zeros())
			flag := b.Array("flag", dag.I32, 1, dag.Zeros())
			first := b.Fill(y.All(), 3, dag.Name("first"))
			op := tt.declare(b, x, y, h, flag, append(common("op"), dag.After(first)))
			_, err := b.Build()
			require.NoError(t, err)
			assert.Equal(t, "op", op.Name)
			assert.Equal(t, dag.High, op.Priority)
			assert.Equal(t, 0, op.Device)
			assert.Equal(t, time.Millisecond, op.Cost)
			assert.Contains(t, op.Deps, int32(first.ID))
		})
	}
}

// TestKindOptions: an option of one kind sets that kind's spec, and on an
// op of another kind it is a Build error naming the op and the option.
func TestKindOptions(t *testing.T) {
	noop := func(context.Context, [][]byte) error { return nil }
	tests := []struct {
		name    string
		declare func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op
		check   func(t *testing.T, op *dag.Op)
		wantErr string
	}{
		{
			name: "AtMost bounds a loop",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				return b.While(flag.All(), func(body *dag.Builder) { body.Fill(flag.All(), 0) }, dag.AtMost(100))
			},
			check: func(t *testing.T, op *dag.Op) { assert.Equal(t, int64(100), op.Control.Max) },
		},
		{
			name: "Alpha, Beta and Output shape a gemm",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				d := b.Array("d", dag.F32, 4, dag.Zeros())
				return b.Gemm(x.Slice(32, 16), x.Slice(0, 16), x.Slice(16, 16), dag.GemmShape{M: 2, N: 2, K: 2},
					dag.Alpha(2), dag.Beta(1), dag.Output(d.All()))
			},
			check: func(t *testing.T, op *dag.Op) {
				assert.Equal(t, 2.0, op.Gemm.Alpha)
				assert.True(t, op.Gemm.SeparateD)
				require.Len(t, op.Access, 4)
				assert.Equal(t, dag.Read, op.Access[dag.GemmC].Mode, "c is only read beside d")
			},
		},
		{
			name: "RunsOnCPU marks a task",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				return b.Task(func(context.Context, dag.TaskStream) error { return nil }, dag.InOut(x.All()), dag.RunsOnCPU())
			},
			check: func(t *testing.T, op *dag.Op) { assert.True(t, op.Task.OnCPU) },
		},
		{
			name: "AtMost on a fill",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				return b.Fill(x.All(), 1, dag.Name("f"), dag.AtMost(3))
			},
			wantErr: `op "f": option AtMost does not apply to fill ops (it is an option of while ops)`,
		},
		{
			name: "Alpha on a copy",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				return b.Copy(x.Slice(0, 16), x.Slice(16, 16), dag.Name("c"), dag.Alpha(2))
			},
			wantErr: `op "c": option Alpha does not apply to copy ops (it is an option of gemm ops)`,
		},
		{
			name: "an access on a fill",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				return b.Fill(x.Slice(0, 16), 1, dag.Name("f"), dag.In(x.Slice(16, 16)))
			},
			wantErr: `op "f": fill ops take no access among their options (in x[16:32])`,
		},
		{
			name: "a nil option is no option",
			declare: func(b *dag.Builder, x, flag *dag.Buffer) *dag.Op {
				return b.Host(noop, nil, dag.Name("h"))
			},
			check: func(t *testing.T, op *dag.Op) { assert.Equal(t, "h", op.Name) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			x := b.Array("x", dag.F32, 12, dag.Zeros())
			flag := b.Array("flag", dag.I32, 1, dag.Zeros())
			op := tt.declare(b, x, flag)
			_, err := b.Build()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, op)
		})
	}
}

// TestLaunchOptionsAreNoArguments: options among a launch's arguments
// configure the op and match no parameter, wherever they stand.
func TestLaunchOptionsAreNoArguments(t *testing.T) {
	b := dag.New()
	x := b.Array("x", dag.F32, 8, dag.Zeros())
	op := b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(8), dag.Name("s"), x, dag.Low, 2.0)
	_, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, "s", op.Name)
	assert.Equal(t, dag.Low, op.Priority)
	require.Len(t, op.Launch.Args, 2)
	assert.Equal(t, 2.0, op.Launch.Args[1].Float)
}

// TestWithAfterLaterOp: With orders an op after one declared later.
func TestWithAfterLaterOp(t *testing.T) {
	b := dag.New()
	x := b.Array("x", dag.F32, 4, dag.Zeros())
	y := b.Array("y", dag.F32, 4, dag.Zeros())
	first := b.Fill(x.All(), 1, dag.Name("first"))
	second := b.Fill(y.All(), 2, dag.Name("second"))
	first.With(dag.After(second))
	g, err := b.Build()
	require.NoError(t, err)
	assert.Equal(t, "second", g.Ops[0].Name)
	assert.Equal(t, "first", g.Ops[1].Name)
}

// TestElements: a view by elements is the view of their bytes, and one
// whose bytes do not fit is refused at Build, not wrapped.
func TestElements(t *testing.T) {
	tests := []struct {
		name         string
		dt           dag.DType
		first, count int64
		want         dag.View // Buf left out
		wantErr      string
	}{
		{name: "f32", dt: dag.F32, first: 2, count: 3, want: dag.View{Offset: 8, Size: 12}},
		{name: "bf16", dt: dag.BF16, first: 2, count: 3, want: dag.View{Offset: 4, Size: 6}},
		{name: "past the end", dt: dag.F32, first: 6, count: 3, wantErr: "out of range"},
		{name: "negative", dt: dag.F32, first: -1, count: 2, wantErr: "out of range"},
		{name: "bytes beyond int64", dt: dag.F64, first: 1 << 61, count: 1, wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			x := b.Array("x", tt.dt, 8, dag.Zeros())
			v := x.Elements(tt.first, tt.count)
			b.Fill(v, 1)
			_, err := b.Build()
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.want.Buf = x
			assert.Equal(t, tt.want, v)
		})
	}
}
