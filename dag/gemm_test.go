package dag_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestGemmDefaultsAndAccesses(t *testing.T) {
	b := dag.New()
	a := b.Buffer("a", 2*3*4*2, dag.Of(dag.BF16), dag.Zeros())
	w := b.Buffer("w", 2*4*5*2, dag.Of(dag.BF16), dag.Zeros())
	c := b.Buffer("c", 2*3*5*2, dag.Of(dag.BF16), dag.Zeros())
	d := b.Buffer("d", 2*3*5*2, dag.Of(dag.BF16), dag.Zeros())
	b.Gemm(c.All(), a.All(), w.All(), dag.GemmShape{M: 3, N: 5, K: 4}, dag.Batched(2, 0, 20, 0), dag.Beta(1), dag.Name("mm"))
	b.Gemm(c.All(), a.All(), w.All(), dag.GemmShape{M: 3, N: 5, K: 4}, dag.Batched(2, 0, 20, 0), dag.Output(d.All()), dag.Beta(0.5), dag.Name("res"))
	g, err := b.Build()
	require.NoError(t, err)
	mm := g.Ops[0]
	s := mm.Gemm
	assert.Equal(t, dag.Gemm, mm.Kind)
	assert.Equal(t, []int64{4, 5, 5}, []int64{s.LDA, s.LDB, s.LDC}, "leading dimensions default to the row lengths")
	assert.Equal(t, []int64{12, 20, 15}, []int64{s.StrideA, s.StrideB, s.StrideC}, "packed strides")
	assert.Equal(t, 1.0, s.Alpha)
	assert.Equal(t, []dag.Mode{dag.Read, dag.Read, dag.ReadWrite}, modes(mm))
	assert.Equal(t, []dag.Mode{dag.Read, dag.Read, dag.Read, dag.Write}, modes(g.Ops[1]))
	assert.Equal(t, []string{"mm"}, deps(g, "res"), "res reads the c that mm wrote")
	assert.Equal(t, dag.GemmD, g.Ops[1].Gemm.OutAccess())
	assert.Equal(t, "3x5x4 x2", s.String())
	assert.Equal(t, 2*3*5*4*2.0, s.Flops())
	assert.Equal(t, "gemm", dag.Gemm.String())
	assert.Equal(t, dag.ComputeClass, dag.Gemm.Info().Class)
	assert.Less(t, dag.GemmDuration(mm), time.Microsecond)
	big := &dag.Op{Kind: dag.Gemm, Gemm: &dag.GemmSpec{GemmShape: dag.GemmShape{M: 2048, N: 16384, K: 4096}, Batch: 1},
		Access: []dag.Access{dag.In(a.All())}}
	assert.InDelta(t, 393*time.Microsecond, dag.GemmDuration(big), float64(2*time.Microsecond), "bf16 at 700 TFLOP/s")
}

func modes(o *dag.Op) []dag.Mode {
	var out []dag.Mode
	for _, a := range o.Access {
		out = append(out, a.Mode)
	}
	return out
}

func TestGemmTransposedLayouts(t *testing.T) {
	b := dag.New()
	a := b.Buffer("a", 4*7*4, dag.Zeros()) // stored K x M = 4 x 7 (lda 7)
	w := b.Buffer("w", 5*6*4, dag.Zeros()) // stored N x K = 5 x 4 with ldb 6
	c := b.Buffer("c", 7*5*4, dag.Zeros())
	b.Gemm(c.All(), a.All(), w.All(), dag.GemmShape{M: 7, N: 5, K: 4}, dag.TransA(), dag.TransB(), dag.LeadingDims(0, 6, 0))
	g, err := b.Build()
	require.NoError(t, err)
	s := g.Ops[0].Gemm
	assert.Equal(t, dag.GemmMatrix{Rows: 4, Cols: 7, LD: 7, Stride: 28}, s.LayoutA())
	assert.Equal(t, dag.GemmMatrix{Rows: 5, Cols: 4, LD: 6, Stride: 30}, s.LayoutB())
	assert.Equal(t, []dag.Mode{dag.Read, dag.Read, dag.Write}, modes(g.Ops[0]), "beta 0: c is only written")
}

func TestGemmErrors(t *testing.T) {
	type bufs struct{ a, b, c, d *dag.Buffer }
	mk := func(bd *dag.Builder, dt dag.DType, n int64) bufs {
		es := dt.Size()
		return bufs{bd.Buffer("a", n*es, dag.Of(dt), dag.Zeros()), bd.Buffer("b", n*es, dag.Of(dt), dag.Zeros()), bd.Buffer("c", n*es, dag.Of(dt), dag.Zeros()), bd.Buffer("d", n*es, dag.Of(dt), dag.Zeros())}
	}
	sh := dag.GemmShape{M: 4, N: 4, K: 4}
	tests := []struct {
		name  string
		build func(bd *dag.Builder)
		field string
		msg   string
	}{
		{"a too small", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 16)
			bd.Gemm(x.c.All(), x.a.Slice(0, 60), x.b.All(), sh, dag.Name("g"))
		}, "a", "holds 15 f32 elements, too few for the gemm 4x4x4"},
		{"m zero", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 16)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), dag.GemmShape{M: 0, N: 4, K: 4}, dag.Name("g"))
		}, "m", "m = 0 is out of range"},
		{"huge k", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 16)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), dag.GemmShape{M: 4, N: 4, K: 1 << 40}, dag.Name("g"))
		}, "k", "out of range"},
		{"mixed dtypes", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 16)
			h := bd.Buffer("h", 32, dag.Of(dag.F16), dag.Zeros())
			bd.Gemm(x.c.All(), x.a.All(), h.All(), sh, dag.Name("g"))
		}, "b", "h is f16 but a is f32"},
		{"integer dtype", func(bd *dag.Builder) {
			x := mk(bd, dag.I32, 16)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.Name("g"))
		}, "dtype", "gemm does not take i32 matrices"},
		{"tf32 with bf16", func(bd *dag.Builder) {
			x := mk(bd, dag.BF16, 16)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.TF32(), dag.Name("g"))
		}, "tf32", "tf32 with bf16"},
		{"lda below the row", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 64)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.LeadingDims(3, 0, 0), dag.Name("g"))
		}, "lda", "lda = 3 is out of range"},
		{"ldc huge", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 64)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.LeadingDims(0, 0, 1<<33), dag.Name("g"))
		}, "ldc", "out of range"},
		{"overflowing span", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 64)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.Batched(1<<30, math.MaxInt64/8, 0, 0), dag.Name("g"))
		}, "a", "more than 2^63"},
		{"negative stride", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 64)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.Batched(2, -1, 0, 0), dag.Name("g"))
		}, "stride_a", "negative"},
		{"overlapping output batches", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 64)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.Batched(2, 0, 0, 8), dag.Name("g"))
		}, "stride_c", "overlap"},
		{"output overlaps an input", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 32)
			bd.Gemm(x.a.Slice(32, 64), x.a.Slice(0, 64), x.b.All(), sh, dag.Name("g"))
		}, "c", "overlaps a"},
		{"d partly over c", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 32)
			bd.Gemm(x.c.Slice(0, 64), x.a.All(), x.b.All(), sh, dag.Output(x.c.Slice(32, 64)), dag.Name("g"))
		}, "d", "partly"},
		{"host memory", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 16)
			h := bd.Buffer("h", 64, dag.PinnedHost(), dag.Zeros())
			bd.Gemm(x.c.All(), h.All(), x.b.All(), sh, dag.Name("g"))
		}, "a", "pinned host memory"},
		{"misaligned view", func(bd *dag.Builder) {
			x := mk(bd, dag.F16, 32)
			bd.Gemm(x.c.All(), x.a.Slice(1, 40), x.b.All(), sh, dag.Name("g"))
		}, "a", "not a whole number of f16 elements"},
		{"nan alpha", func(bd *dag.Builder) {
			x := mk(bd, dag.F32, 16)
			bd.Gemm(x.c.All(), x.a.All(), x.b.All(), sh, dag.Alpha(math.NaN()), dag.Name("g"))
		}, "alpha", "not finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bd := dag.New()
			tt.build(bd)
			_, err := bd.Build()
			require.Error(t, err)
			es := dag.Errors(err)
			require.NotEmpty(t, es, "%v", err)
			var found bool
			for _, e := range es {
				if e.Op == "g" && e.Field == tt.field {
					found = true
					assert.Contains(t, e.Error(), tt.msg)
				}
			}
			assert.True(t, found, "no error on field %q of op g in %v", tt.field, err)
		})
	}
}

func TestGemmInterleavedBatchesAreAccepted(t *testing.T) {
	// [m, batch, n] output: each batch's rows interleave with the others'.
	b := dag.New()
	a := b.Buffer("a", 2*3*4*4, dag.Zeros())
	w := b.Buffer("w", 2*4*5*4, dag.Zeros())
	c := b.Buffer("c", 3*2*5*4, dag.Zeros())
	b.Gemm(c.All(), a.All(), w.All(), dag.GemmShape{M: 3, N: 5, K: 4}, dag.LeadingDims(0, 0, 10), dag.Batched(2, 0, 0, 5))
	_, err := b.Build()
	require.NoError(t, err)
}

// FuzzGemmChecks declares GEMMs of arbitrary shapes, layouts and views:
// Build either refuses one with *dag.Errors naming the op, or accepts one
// that CheckGemmViews (what backends rely on before indexing) accepts too.
func FuzzGemmChecks(f *testing.F) {
	f.Add(int64(4), int64(5), int64(6), int64(0), int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), false, false, int64(1024), int64(0), uint8(0))
	f.Add(int64(3), int64(5), int64(4), int64(0), int64(0), int64(10), int64(2), int64(0), int64(0), int64(5), true, true, int64(4096), int64(8), uint8(3))
	f.Add(int64(1<<31), int64(1), int64(1), int64(1<<40), int64(-3), int64(0), int64(1<<30), int64(1<<62), int64(0), int64(-1), false, true, int64(1), int64(2), uint8(2))
	f.Fuzz(func(t *testing.T, m, n, k, lda, ldb, ldc, batch, sa, sb, sc int64, tA, tB bool, size, off int64, dsel uint8) {
		dts := []dag.DType{dag.F32, dag.F64, dag.F16, dag.BF16, dag.I32}
		dt := dts[int(dsel)%len(dts)]
		size = max(1, min(size, 1<<20))
		b := dag.New()
		bufs := make([]*dag.Buffer, 5)
		for i, name := range []string{"a", "b", "c", "d", "bias"} {
			bufs[i] = b.Buffer(name, size, dag.Of(dt), dag.Zeros())
		}
		view := func(i int) dag.View {
			o := min(max(off, 0), size-1)
			return bufs[i].Slice(o, size-o)
		}
		opts := []dag.OpOption{dag.LeadingDims(lda, ldb, ldc), dag.Batched(batch, sa, sb, sc), dag.Beta(1)}
		if tA {
			opts = append(opts, dag.TransA())
		}
		if tB {
			opts = append(opts, dag.TransB())
		}
		if dsel&4 != 0 {
			opts = append(opts, dag.Output(view(3)))
		}
		// The high bits pick an epilogue (an unknown one included) and
		// whether a bias is given, fitting the epilogue or not.
		if e := dag.Epilogue(dsel >> 5); e != dag.NoEpilogue {
			opts = append(opts, dag.WithEpilogue(e))
		}
		if dsel&8 != 0 {
			opts = append(opts, dag.Bias(view(4)))
		}
		b.Gemm(view(2), view(0), view(1), dag.GemmShape{M: m, N: n, K: k}, opts...).With(dag.Name("g"))
		g, err := b.Build()
		if err != nil {
			es := dag.Errors(err)
			require.NotEmpty(t, es, "%v", err)
			for _, e := range es {
				assert.Equal(t, "g", e.Op, "%v", e)
			}
			return
		}
		require.NoError(t, dag.CheckGemmViews(g.Ops[0]))
	})
}
