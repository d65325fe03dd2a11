package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
)

// encode stores vs as elements of dt.
func encode(dt dag.DType, vs []float64) []byte {
	es := int(dt.Size())
	out := make([]byte, es*len(vs))
	for i, v := range vs {
		copy(out[i*es:], dag.ElemBytes(dt, v))
	}
	return out
}

// decode reads every element of b as dt.
func decode(dt dag.DType, b []byte) []float64 {
	es := int(dt.Size())
	out := make([]float64, len(b)/es)
	for i := range out {
		out[i] = dag.ElemValue(b[i*es:], dt)
	}
	return out
}

// gemmTolerance bounds |got - want| for a GEMM element of dt whose exact
// value is want and whose terms' magnitudes sum to mag (|alpha| sum |a b|
// + |beta c|): the accumulation's rounding, relative to mag, plus one
// rounding of the result to dt.
func gemmTolerance(dt dag.DType, want, mag float64) float64 {
	switch dt {
	case dag.F64:
		return 1e-13 * mag
	case dag.F16: // f32 accumulation, then half an ulp of binary16
		return 1e-5*mag + 0x1p-11*math.Abs(want)
	case dag.BF16: // f32 accumulation, then half an ulp of bfloat16
		return 1e-5*mag + 0x1p-8*math.Abs(want)
	}
	return 1e-5 * mag // f32: K ulps of f32 for these K
}

// naiveGemm is the reference: D = alpha op(A) op(B) + beta C in f64, over
// the values the buffers hold, with each element's magnitude sum.
func naiveGemm(s *dag.GemmSpec, a, b, c []float64) (d, mag []float64) {
	la, lb, lc := s.LayoutA(), s.LayoutB(), s.LayoutC()
	d = append([]float64(nil), c...)
	mag = make([]float64, len(c))
	at := func(x []float64, l dag.GemmMatrix, bi, r, col int64, trans bool) float64 {
		if trans {
			r, col = col, r
		}
		return x[bi*l.Stride+r*l.LD+col]
	}
	for bi := range s.Batch {
		for i := range s.M {
			for j := range s.N {
				var sum, m float64
				for p := range s.K {
					x := at(a, la, bi, i, p, s.TransA) * at(b, lb, bi, p, j, s.TransB)
					sum += x
					m += math.Abs(x)
				}
				e := bi*lc.Stride + i*lc.LD + j
				cv := 0.0
				if s.Beta != 0 {
					cv = s.Beta * c[e]
				}
				d[e] = s.Alpha*sum + cv
				mag[e] = math.Abs(s.Alpha)*m + math.Abs(cv)
			}
		}
	}
	return d, mag
}

func randomValues(r *rand.Rand, n int64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 2*r.Float64() - 1
	}
	return out
}

func TestGemmMatchesNaiveProduct(t *testing.T) {
	type layout struct {
		name       string
		ld         [3]int64 // 0: default
		batch      int64
		separateD  bool
		alpha      float64
		beta       float64
		stridePadC int64 // extra elements between output matrices
	}
	layouts := []layout{
		{name: "plain", alpha: 1},
		{name: "batched", batch: 3, alpha: 1},
		{name: "scaled with beta", alpha: -0.5, beta: 2},
		{name: "padded rows", ld: [3]int64{11, 13, 9}, alpha: 1, beta: 1},
		{name: "batched residual into d", batch: 2, separateD: true, alpha: 1.5, beta: 1, stridePadC: 5},
	}
	const m, n, k = 5, 7, 6
	for _, dt := range []dag.DType{dag.F32, dag.F64, dag.F16, dag.BF16} {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, lay := range layouts {
					name := fmt.Sprintf("%s/tA=%v/tB=%v/%s", dt, tA, tB, lay.name)
					t.Run(name, func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(dt), uint64(len(name))))
						batch := max(lay.batch, 1)
						spec := &dag.GemmSpec{GemmShape: dag.GemmShape{M: m, N: n, K: k}, TransA: tA, TransB: tB,
							LDA: lay.ld[0], LDB: lay.ld[1], LDC: lay.ld[2], Batch: batch}
						// Sizes from the defaults Build will pick.
						ldOr := func(ld, cols int64) int64 {
							if ld == 0 {
								return cols
							}
							return ld
						}
						la, lb := spec.LayoutA(), spec.LayoutB()
						lda, ldb, ldc := ldOr(lay.ld[0], la.Cols), ldOr(lay.ld[1], lb.Cols), ldOr(lay.ld[2], n)
						strideC := m*ldc + lay.stridePadC
						na, nb, nc := batch*la.Rows*lda, batch*lb.Rows*ldb, (batch-1)*strideC+(m-1)*ldc+n
						av, bv, cv := randomValues(r, na), randomValues(r, nb), randomValues(r, nc)
						opts := []dag.OpOption{dag.Alpha(lay.alpha), dag.Beta(lay.beta),
							dag.LeadingDims(lay.ld[0], lay.ld[1], lay.ld[2]), dag.Batched(batch, 0, 0, strideC)}
						if tA {
							opts = append(opts, dag.TransA())
						}
						if tB {
							opts = append(opts, dag.TransB())
						}
						var g *dag.Graph
						g = build(t, func(bd *dag.Builder) {
							a := bd.Buffer("a", na*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, av)))
							b := bd.Buffer("b", nb*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, bv)))
							c := bd.Buffer("c", nc*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, cv)))
							if lay.separateD {
								d := bd.Buffer("d", nc*dt.Size(), dag.Of(dt), dag.Value(7))
								opts = append(opts, dag.Output(d.All()))
							}
							bd.Gemm(c.All(), a.All(), b.All(), dag.GemmShape{M: m, N: n, K: k}, opts...).With(dag.Name("mm"))
						})
						out := execute(t, plan(t, g, 1))
						s := g.Ops[0].Gemm
						// The reference reads the stored (rounded) inputs.
						want, mag := naiveGemm(s, decode(dt, out["a"]), decode(dt, out["b"]), decode(dt, encode(dt, cv)))
						got := decode(dt, out["c"])
						if lay.separateD {
							got = decode(dt, out["d"])
							assert.Equal(t, encode(dt, cv), out["c"], "c is only read")
						}
						written := make([]bool, len(got))
						lc := s.LayoutC()
						for bi := range s.Batch {
							for i := range s.M {
								for j := range s.N {
									written[bi*lc.Stride+i*lc.LD+j] = true
								}
							}
						}
						for e := range got {
							switch {
							case !written[e] && lay.separateD:
								require.Equal(t, 7.0, got[e], "element %d between matrices of d is untouched", e)
							case !written[e]:
								require.Equal(t, dag.ElemValue(encode(dt, cv[e:e+1]), dt), got[e], "element %d between matrices of c is untouched", e)
							default:
								require.InDelta(t, want[e], got[e], gemmTolerance(dt, want[e], mag[e]), "element %d", e)
							}
						}
					})
				}
			}
		}
	}
}

func TestGemmBetaZeroIgnoresNaNInC(t *testing.T) {
	g := build(t, func(bd *dag.Builder) {
		a := bd.Buffer("a", 4*4, dag.Value(1))
		b := bd.Buffer("b", 4*4, dag.Value(2))
		c := bd.Buffer("c", 4*4, dag.Value(math.NaN()))
		bd.Gemm(c.All(), a.All(), b.All(), dag.GemmShape{M: 2, N: 2, K: 2})
	})
	out := execute(t, plan(t, g, 1))
	assert.Equal(t, []float32{4, 4, 4, 4}, f32s(out["c"]))
}

// TestGemmPipelineAcrossStreams streams chunks of a small MLP block (h =
// gelu(x W1 + b1), y = h W2 + x) through two reused device buffers, planned
// on one stream and on four with random delays: the inferred dependencies
// (including the WAR waits that make reuse safe) give the same bytes.
func TestGemmPipelineAcrossStreams(t *testing.T) {
	const chunks, tk, d, hd = 4, 8, 16, 32
	build := func() *dag.Graph {
		bd := dag.New()
		bf := dag.Of(dag.BF16)
		w1 := bd.Buffer("w1", d*hd*2, bf, dag.Random(1))
		b1 := bd.Buffer("b1", hd*2, bf, dag.Random(2))
		w2 := bd.Buffer("w2", hd*d*2, bf, dag.Random(3))
		in := bd.Buffer("in", chunks*tk*d*2, bf, dag.PinnedHost(), dag.Random(4))
		out := bd.Buffer("out", chunks*tk*d*2, bf, dag.PinnedHost(), dag.Zeros())
		var xs, ys [2]*dag.Buffer
		for i := range 2 {
			xs[i] = bd.Buffer(fmt.Sprintf("x%d", i), tk*d*2, bf, dag.Zeros())
			ys[i] = bd.Buffer(fmt.Sprintf("y%d", i), tk*d*2, bf, dag.Zeros())
		}
		h := bd.Buffer("h", tk*hd*2, bf, dag.Zeros())
		for c := range int64(chunks) {
			x, y := xs[c%2], ys[c%2]
			bd.Copy(x.All(), in.Slice(c*tk*d*2, tk*d*2))
			bd.Gemm(h.All(), x.All(), w1.All(), dag.GemmShape{M: tk, N: hd, K: d})
			bd.Launch(dag.BiasAdd, dag.Grid1(4), dag.Grid1(64), h, b1)
			bd.Launch(dag.Gelu, dag.Grid1(4), dag.Grid1(64), h, h)
			bd.Gemm(x.All(), h.All(), w2.All(), dag.GemmShape{M: tk, N: d, K: hd}, dag.Beta(1), dag.Output(y.All()))
			bd.Copy(out.Slice(c*tk*d*2, tk*d*2), y.All())
		}
		g, err := bd.Build()
		require.NoError(t, err)
		return g
	}
	g := build()
	want := execute(t, plan(t, g, 1))
	nonzero := false
	for _, v := range decode(dag.BF16, want["out"]) {
		nonzero = nonzero || v != 0
	}
	require.True(t, nonzero, "the pipeline computes something")
	for seed := range int64(3) {
		got := execute(t, plan(t, g, 4), cpu.Delays(seed, 200*time.Microsecond))
		require.Equal(t, want["out"], got["out"], "seed %d", seed)
	}
}
