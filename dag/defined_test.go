package dag_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// TestUndefinedReads: an op that reads bytes no init and no earlier write
// defined is a Build error naming the op, the buffer and the bytes; what
// is defined on every path (or declared uninitialised) builds.
func TestUndefinedReads(t *testing.T) {
	host := func(context.Context, [][]byte) error { return nil }
	for _, tt := range []struct {
		name    string
		declare func(b *dag.Builder)
		want    string // "" builds
		hint    string
	}{
		{"copy with swapped arguments", func(b *dag.Builder) {
			in := b.Buffer("in", 64, dag.PinnedHost(), dag.Value(1))
			x := b.Buffer("x", 64)
			b.Copy(in.All(), x.All(), dag.Name("upload"))
		}, `op "upload": reads all of x, which nothing wrote before it`, "swap its arguments"},
		{"copy the right way", func(b *dag.Builder) {
			in := b.Buffer("in", 64, dag.PinnedHost(), dag.Value(1))
			x := b.Buffer("x", 64)
			b.Copy(x.All(), in.All())
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0)
		}, "", ""},
		{"chunked upload missing a chunk", func(b *dag.Builder) {
			in := b.Buffer("in", 64, dag.PinnedHost(), dag.Value(1))
			x := b.Buffer("x", 64)
			for _, off := range []int64{0, 16, 48} {
				b.Copy(x.Slice(off, 16), in.Slice(off, 16))
			}
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("scale"))
		}, `op "scale": reads bytes 32:48 of x`, "give x an init"},
		{"chunked upload, every chunk, out of order", func(b *dag.Builder) {
			in := b.Buffer("in", 64, dag.PinnedHost(), dag.Value(1))
			x := b.Buffer("x", 64)
			for _, off := range []int64{48, 0, 32, 16} {
				b.Copy(x.Slice(off, 16), in.Slice(off, 16))
			}
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0)
		}, "", ""},
		{"inout of a buffer without init", func(b *dag.Builder) {
			x := b.Buffer("x", 64)
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("scale"))
		}, `op "scale": reads all of x`, ""},
		{"declared uninitialised", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.PinnedHost(), dag.Uninitialized())
			b.Host(host, dag.In(x.All()))
		}, "", ""},
		{"temporary read before it is written", func(b *dag.Builder) {
			in := b.Buffer("in", 64, dag.Value(1))
			tmp := b.Buffer("tmp", 64, dag.Temporary())
			b.Copy(in.All(), tmp.All(), dag.Name("back"))
		}, `op "back": reads all of tmp`, ""},
		{"temporary written then read", func(b *dag.Builder) {
			out := b.Buffer("out", 64)
			tmp := b.Buffer("tmp", 64, dag.Temporary())
			b.Fill(tmp.All(), 1)
			b.Copy(out.All(), tmp.All())
		}, "", ""},
		{"temporary read after a second alloc", func(b *dag.Builder) {
			out := b.Buffer("out", 64)
			tmp := b.Buffer("tmp", 64, dag.Temporary())
			b.Alloc(tmp)
			b.Copy(out.All(), tmp.All(), dag.Name("read"))
		}, `op "read": reads all of tmp`, ""},
		{"host step writes what the next reads", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.PinnedHost())
			b.Host(host, dag.Out(x.All()))
			b.Host(host, dag.In(x.All()))
		}, "", ""},
		{"host step reads nothing written", func(b *dag.Builder) {
			x := b.Buffer("x", 64, dag.PinnedHost())
			b.Host(host, dag.In(x.Slice(8, 8)), dag.Name("check"))
		}, `op "check": reads bytes 8:16 of x`, ""},
		{"gemm with beta reads c", func(b *dag.Builder) {
			a := b.Buffer("a", 64, dag.Value(1))
			c := b.Buffer("c", 64)
			b.Gemm(c.All(), a.All(), a.All(), dag.GemmShape{M: 4, N: 4, K: 4}, dag.Beta(1), dag.Name("mm"))
		}, `op "mm": reads all of c`, ""},
		{"gemm without beta writes c", func(b *dag.Builder) {
			a := b.Buffer("a", 64, dag.Value(1))
			c := b.Buffer("c", 64)
			b.Gemm(c.All(), a.All(), a.All(), dag.GemmShape{M: 4, N: 4, K: 4})
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), c, 2.0)
		}, "", ""},
		{"recv then all_reduce", func(b *dag.Builder) {
			x := b.Buffer("x", 64)
			b.Recv(x.All(), 1)
			b.AllReduce(x.All(), dag.Sum)
		}, "", ""},
		{"all_reduce of nothing", func(b *dag.Builder) {
			x := b.Buffer("x", 64)
			b.AllReduce(x.All(), dag.Sum, dag.Name("ar"))
		}, `op "ar": reads all of x`, ""},
		{"broadcast receives", func(b *dag.Builder) {
			x := b.Buffer("x", 64)
			b.Broadcast(x.All(), 0)
			b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0)
		}, "", ""},
		{"loop body reads what it writes later", func(b *dag.Builder) {
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			x := b.Buffer("x", 64, dag.Value(1))
			y := b.Buffer("y", 64)
			b.While(flag.Slice(0, 4), func(body *dag.Builder) {
				body.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(16), x, y, 1.0, dag.Name("use"))
				body.Copy(y.All(), x.All())
				body.Fill(flag.Slice(0, 4), 0)
			}, dag.Name("loop"))
		}, `op "use": reads all of y`, ""},
		{"loop body reads what it wrote earlier, after reads what it wrote", func(b *dag.Builder) {
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			x := b.Buffer("x", 64, dag.Value(1))
			y := b.Buffer("y", 64)
			out := b.Buffer("out", 64)
			b.While(flag.Slice(0, 4), func(body *dag.Builder) {
				body.Copy(y.All(), x.All())
				body.Launch(dag.Axpy, dag.Grid1(1), dag.Threads(16), x, y, 1.0)
				body.Fill(flag.Slice(0, 4), 0)
			})
			b.Copy(out.All(), y.All())
		}, "", ""},
		{"loop flag never set", func(b *dag.Builder) {
			flag := b.Buffer("flag", 4, dag.Of(dag.I32))
			b.While(flag.Slice(0, 4), func(body *dag.Builder) {
				body.Fill(flag.Slice(0, 4), 0)
			}, dag.Name("loop"))
		}, `op "loop": reads all of flag`, ""},
		{"each branch arm checked from before the branch", func(b *dag.Builder) {
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			x := b.Buffer("x", 64, dag.Value(1))
			y := b.Buffer("y", 64)
			b.If(flag.Slice(0, 4), func(then *dag.Builder) {
				then.Copy(y.All(), x.All())
			}, func(els *dag.Builder) {
				els.Copy(x.All(), y.All(), dag.Name("back"))
			}, dag.Name("br"))
		}, `op "back": reads all of y`, ""},
		{"either arm's write counts after the branch", func(b *dag.Builder) {
			flag := b.Buffer("flag", 4, dag.Of(dag.I32), dag.Value(1))
			x := b.Buffer("x", 64, dag.Value(1))
			y := b.Buffer("y", 64)
			out := b.Buffer("out", 64)
			b.If(flag.Slice(0, 4), func(then *dag.Builder) {
				then.Copy(y.Slice(0, 32), x.Slice(0, 32))
			}, func(els *dag.Builder) {
				els.Copy(y.Slice(32, 32), x.Slice(32, 32))
			})
			b.Copy(out.All(), y.All())
		}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.declare(b)
			_, err := b.Build()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, tt.hint)
		})
	}
}

// TestArray: an Array is declared by element type and count, its size in
// bytes follows; options that would change what count means are refused.
func TestArray(t *testing.T) {
	b := dag.New()
	x := b.Array("x", dag.F32, 256, dag.Zeros())
	h := b.Array("h", dag.BF16, 3, dag.PinnedHost(), dag.Zeros())
	raw := b.Buffer("raw", 256, dag.Zeros())
	b.Copy(raw.All(), x.Slice(0, 256))
	b.Copy(x.Slice(0, 6), h.All())
	_, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, int64(1024), x.Size)
	require.Equal(t, int64(256), x.Elems())
	require.Equal(t, dag.BF16, h.DType)
	require.Equal(t, int64(6), h.Size)
	require.Equal(t, int64(64), raw.Elems(), "a Buffer's size is bytes: 256 of them hold 64 f32s")

	for _, tt := range []struct {
		name    string
		declare func(b *dag.Builder)
		want    string
	}{
		{"Of changes the element type", func(b *dag.Builder) { b.Array("y", dag.F32, 4, dag.Of(dag.I32)) },
			`buffer "y": declared as an array of 4 f32 elements, and Of makes it i32`},
		{"no elements", func(b *dag.Builder) { b.Array("y", dag.F32, 0) }, `buffer "y": count 0 is not positive`},
		{"negative count", func(b *dag.Builder) { b.Array("y", dag.F64, -1) }, `buffer "y": count -1 is not positive`},
		{"bytes overflow", func(b *dag.Builder) { b.Array("y", dag.F64, 1<<62) }, "elements of f64 do not fit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := dag.New()
			tt.declare(b)
			_, err := b.Build()
			require.ErrorContains(t, err, tt.want)
		})
	}
}
