package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// applyRef is epilogue e on the exact value x + bias, in f64.
func applyRef(e dag.Epilogue, x, bias float64) float64 {
	if e.HasBias() {
		x += bias
	}
	switch e.Activation() {
	case dag.EpiGelu:
		return geluRef(x)
	case dag.EpiRelu:
		return math.Max(x, 0)
	}
	return x
}

// Every epilogue on every dtype it takes matches a straightforward
// reference: the f64 product of the stored inputs, the bias, the
// activation, within the GEMM's accumulation error (the activations'
// slopes are below 1.2) and one rounding to the dtype.
func TestGemmEpilogues(t *testing.T) {
	type layout struct {
		name      string
		batch     int64
		ldc       int64
		separateD bool
		alpha     float64
		beta      float64
	}
	layouts := []layout{
		{name: "plain", alpha: 1},
		{name: "batched residual into d", batch: 2, separateD: true, alpha: 0.5, beta: 1},
		{name: "padded rows", ldc: 9, alpha: 2, beta: -1},
	}
	const m, n, k = 5, 7, 6
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		for _, e := range dag.Epilogues()[1:] {
			for _, lay := range layouts {
				name := fmt.Sprintf("%s/%s/%s", dt, e, lay.name)
				t.Run(name, func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(dt)+uint64(e)<<8, uint64(len(name))))
					batch := max(lay.batch, 1)
					ldc := max(lay.ldc, n)
					na, nb, nc := batch*m*k, batch*k*n, batch*m*ldc
					av, bv, cv, biasv := randomValues(r, na), randomValues(r, nb), randomValues(r, nc), randomValues(r, n)
					opts := []dag.OpOption{dag.Alpha(lay.alpha), dag.Beta(lay.beta), dag.LeadingDims(0, 0, lay.ldc),
						dag.Batched(batch, 0, 0, 0), dag.WithEpilogue(e)}
					g := build(t, func(bd *dag.Builder) {
						a := bd.Buffer("a", na*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, av)))
						b := bd.Buffer("b", nb*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, bv)))
						c := bd.Buffer("c", nc*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, cv)))
						if e.HasBias() {
							bias := bd.Buffer("bias", n*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, biasv)))
							opts = append(opts, dag.Bias(bias.All()))
						}
						if lay.separateD {
							d := bd.Buffer("d", nc*dt.Size(), dag.Of(dt), dag.Value(7))
							opts = append(opts, dag.Output(d.All()))
						}
						bd.Gemm(c.All(), a.All(), b.All(), dag.GemmShape{M: m, N: n, K: k}, opts...).With(dag.Name("mm"))
					})
					out := execute(t, plan(t, g, 1))
					s := g.Ops[0].Gemm
					pre, mag := naiveGemm(s, decode(dt, out["a"]), decode(dt, out["b"]), decode(dt, encode(dt, cv)))
					bias := decode(dt, encode(dt, biasv))
					got := decode(dt, out["c"])
					if lay.separateD {
						got = decode(dt, out["d"])
					}
					lc := s.LayoutC()
					for bi := range s.Batch {
						for i := range s.M {
							for j := range s.N {
								at := bi*lc.Stride + i*lc.LD + j
								want := applyRef(e, pre[at], bias[j])
								tol := 1.2*gemmTolerance(dt, pre[at], mag[at]+math.Abs(bias[j])) + layerTolerance(dt, want)
								require.InDelta(t, want, got[at], tol, "batch %d element [%d, %d]", bi, i, j)
							}
						}
					}
					if lay.ldc > n {
						// The gaps between rows keep their bytes.
						require.Equal(t, dag.ElemValue(encode(dt, cv[n:n+1]), dt), got[n])
					}
				})
			}
		}
	}
}

// For f32 the fused epilogue is the builtins' arithmetic: the gemm with
// its epilogue equals the gemm followed by bias_add and gelu, bit for
// bit. For half precision it rounds once where they round after each op,
// so the two agree within a step of the dtype.
func TestGemmEpilogueMatchesBuiltins(t *testing.T) {
	const m, n, k = 8, 16, 32
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(dt)))
			av, bv, biasv := randomValues(r, m*k), randomValues(r, k*n), randomValues(r, n)
			run := func(fused bool) []float64 {
				g := build(t, func(bd *dag.Builder) {
					a := bd.Buffer("a", m*k*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, av)))
					b := bd.Buffer("b", k*n*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, bv)))
					bias := bd.Buffer("bias", n*dt.Size(), dag.Of(dt), dag.Contents(encode(dt, biasv)))
					h := bd.Buffer("h", m*n*dt.Size(), dag.Of(dt), dag.Zeros())
					if fused {
						bd.Gemm(h.All(), a.All(), b.All(), dag.GemmShape{M: m, N: n, K: k}, dag.WithEpilogue(dag.EpiBiasGelu), dag.Bias(bias.All()))
						return
					}
					bd.Gemm(h.All(), a.All(), b.All(), dag.GemmShape{M: m, N: n, K: k})
					bd.Launch(dag.BiasAdd, dag.Grid1(1), dag.Grid1(64), h, bias)
					bd.Launch(dag.Gelu, dag.Grid1(1), dag.Grid1(64), h, h)
				})
				return decode(dt, execute(t, plan(t, g, 1))["h"])
			}
			fused, unfused := run(true), run(false)
			if dt == dag.F32 {
				require.Equal(t, unfused, fused)
				return
			}
			// The builtins round the product and the biased value, each
			// by half a step at most, which gelu's slope (below 1.2)
			// carries to the result; both round the result.
			step := 0x1p-10
			if dt == dag.BF16 {
				step = 0x1p-7
			}
			s := &dag.GemmSpec{GemmShape: dag.GemmShape{M: m, N: n, K: k}, Alpha: 1, LDA: k, LDB: n, LDC: n, Batch: 1}
			prod, _ := naiveGemm(s, decode(dt, encode(dt, av)), decode(dt, encode(dt, bv)), make([]float64, m*n))
			bias := decode(dt, encode(dt, biasv))
			for i := range fused {
				p := prod[i]
				tol := step*(0.6*(math.Abs(p)+math.Abs(p+bias[i%n]))+math.Abs(unfused[i])) + 1e-6
				require.InDelta(t, unfused[i], fused[i], tol, "element %d", i)
			}
		})
	}
}
