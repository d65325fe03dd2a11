package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// geluRef is the tanh form of GELU in f64.
func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// layerTolerance bounds the error of an f32 computation stored as dt:
// a few f32 ulps of the exact value, plus one rounding to dt.
func layerTolerance(dt dag.DType, want float64) float64 {
	rel := 8 * 0x1p-24
	switch dt {
	case dag.F16:
		rel += 0x1p-11
	case dag.BF16:
		rel += 0x1p-8
	}
	return rel*math.Abs(want) + 1e-30
}

func TestLayerBuiltins(t *testing.T) {
	const rows, cols = 6, 10
	one, grid := dag.Grid1(3), dag.Grid1(32)
	tests := []struct {
		name   string
		launch func(bd *dag.Builder, y, x, bias *dag.Buffer)
		ref    func(x, y0, bias []float64) []float64 // from the stored inputs
	}{
		{"gelu", func(bd *dag.Builder, y, x, _ *dag.Buffer) { bd.Launch(dag.Gelu, one, grid, y, x) },
			func(x, _, _ []float64) []float64 { return mapF(x, geluRef) }},
		{"relu", func(bd *dag.Builder, y, x, _ *dag.Buffer) { bd.Launch(dag.Relu, one, grid, y, x) },
			func(x, _, _ []float64) []float64 { return mapF(x, func(v float64) float64 { return math.Max(v, 0) }) }},
		{"bias_add", func(bd *dag.Builder, y, _, b *dag.Buffer) { bd.Launch(dag.BiasAdd, one, grid, y, b) },
			func(_, y0, b []float64) []float64 {
				out := make([]float64, len(y0))
				for i := range out {
					out[i] = y0[i] + b[i%cols]
				}
				return out
			}},
		{"softmax", func(bd *dag.Builder, y, x, _ *dag.Buffer) { bd.Launch(dag.Softmax, one, grid, y, x, cols) },
			func(x, _, _ []float64) []float64 {
				out := make([]float64, len(x))
				for r := 0; r < len(x); r += cols {
					m := math.Inf(-1)
					for _, v := range x[r : r+cols] {
						m = math.Max(m, v)
					}
					var s float64
					for _, v := range x[r : r+cols] {
						s += math.Exp(v - m)
					}
					for j, v := range x[r : r+cols] {
						out[r+j] = math.Exp(v-m) / s
					}
				}
				return out
			}},
		{"scale", func(bd *dag.Builder, y, _, _ *dag.Buffer) { bd.Launch(dag.Scale, one, grid, y, -1.5) },
			func(_, y0, _ []float64) []float64 { return mapF(y0, func(v float64) float64 { return -1.5 * v }) }},
		{"axpy", func(bd *dag.Builder, y, x, _ *dag.Buffer) { bd.Launch(dag.Axpy, one, grid, y, x, 0.25) },
			func(x, y0, _ []float64) []float64 {
				out := make([]float64, len(x))
				for i := range out {
					out[i] = y0[i] + 0.25*x[i]
				}
				return out
			}},
		{"add", func(bd *dag.Builder, y, x, _ *dag.Buffer) {
			c := bd.Buffer("c", y.Size, dag.Of(y.DType), dag.Zeros())
			bd.Launch(dag.Add, one, grid, c, x, y)
			bd.Copy(y.All(), c.All())
		}, func(x, y0, _ []float64) []float64 {
			out := make([]float64, len(x))
			for i := range out {
				out[i] = y0[i] + x[i]
			}
			return out
		}},
		{"iota", func(bd *dag.Builder, y, _, _ *dag.Buffer) { bd.Launch(dag.Iota, one, grid, y, 0.5) },
			func(_, y0, _ []float64) []float64 {
				out := make([]float64, len(y0))
				for i := range out {
					out[i] = 0.5 + float64(i)
				}
				return out
			}},
	}
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", tt.name, dt), func(t *testing.T) {
				r := rand.New(rand.NewPCG(3, uint64(dt)))
				xv := make([]float64, rows*cols)
				for i := range xv {
					xv[i] = 8*r.Float64() - 4
				}
				xv[0], xv[1] = 0, -0.0
				yv := randomValues(r, rows*cols)
				bv := randomValues(r, cols)
				es := dt.Size()
				g := build(t, func(bd *dag.Builder) {
					x := bd.Buffer("x", rows*cols*es, dag.Of(dt), dag.Contents(encode(dt, xv)))
					y := bd.Buffer("y", rows*cols*es, dag.Of(dt), dag.Contents(encode(dt, yv)))
					b := bd.Buffer("b", cols*es, dag.Of(dt), dag.Contents(encode(dt, bv)))
					tt.launch(bd, y, x, b)
				})
				if dt != dag.F32 {
					assert.Equal(t, dt, g.Ops[0].Launch.Kernel.ElemDType(), "Build picks the %s variant", dt)
					assert.Equal(t, g.Ops[0].Launch.Kernel.Base().Name+"_"+dt.String(), g.Ops[0].Launch.Kernel.EntryName())
				}
				out := execute(t, plan(t, g, 1))
				want := tt.ref(decode(dt, out["x"]), decode(dt, encode(dt, yv)), decode(dt, out["b"]))
				got := decode(dt, out["y"])
				xs := decode(dt, out["x"])
				for i := range want {
					tol := layerTolerance(dt, want[i])
					if tt.name == "gelu" {
						// 1 + tanh cancels for negative x: its f32 rounding
						// is relative to 0.5|x|, not to the result.
						tol += 8 * 0x1p-24 * math.Abs(xs[i])
					}
					require.InDelta(t, want[i], got[i], tol, "element %d", i)
				}
			})
		}
	}
}

func mapF(x []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = f(v)
	}
	return out
}

func TestGeluMatchesPyTorch(t *testing.T) {
	// torch.nn.functional.gelu(torch.tensor([...]), approximate="tanh") in f32.
	in := []float32{-3, -1, -0.5, 0, 0.5, 1, 3}
	want := []float32{-0.0036373, -0.1588080, -0.1542859, 0, 0.3457141, 0.8411920, 2.9963627}
	g := build(t, func(bd *dag.Builder) {
		x := bd.Buffer("x", 4*int64(len(in)), dag.Contents(f32Bytes(in...)))
		bd.Launch(dag.Gelu, dag.Grid1(1), dag.Grid1(8), bd.Buffer("y", x.Size, dag.Zeros()), x)
	})
	got := f32s(execute(t, plan(t, g, 1))["y"])
	for i := range want {
		assert.InDelta(t, want[i], got[i], 2e-7, "gelu(%g)", in[i])
	}
}

func TestHalfBuiltinErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(bd *dag.Builder)
		msg   string
	}{
		{"mixed half dtypes", func(bd *dag.Builder) {
			bd.Launch(dag.Gelu, dag.Grid1(1), dag.Grid1(1), bd.Buffer("y", 8, dag.Of(dag.F16), dag.Zeros()), bd.Buffer("x", 8, dag.Of(dag.BF16), dag.Zeros()))
		}, "x is bf16 but another argument is f16"},
		{"no half variant", func(bd *dag.Builder) {
			bd.Launch(dag.ReduceSum, dag.Grid1(1), dag.Grid1(1), bd.Buffer("y", 8, dag.Of(dag.F16), dag.Zeros()), bd.Buffer("x", 8, dag.Of(dag.F16), dag.Zeros()))
		}, "reduce_sum works on f32 elements, not f16"},
		{"bias not a row", func(bd *dag.Builder) {
			bd.Launch(dag.BiasAdd, dag.Grid1(1), dag.Grid1(1), bd.Buffer("y", 20, dag.Of(dag.BF16), dag.Zeros()), bd.Buffer("b", 6, dag.Of(dag.BF16), dag.Zeros()))
		}, "y holds 10 elements, not a whole number of rows of b's 3"},
		{"softmax cols", func(bd *dag.Builder) {
			bd.Launch(dag.Softmax, dag.Grid1(1), dag.Grid1(1), bd.Buffer("y", 40, dag.Zeros()), bd.Buffer("x", 40, dag.Zeros()), 3)
		}, "x holds 10 elements, not a whole number of rows of 3"},
		{"odd half view", func(bd *dag.Builder) {
			y := bd.Buffer("y", 8, dag.Of(dag.F16), dag.Zeros())
			bd.Launch(dag.Relu, dag.Grid1(1), dag.Grid1(1), y.Slice(1, 4), bd.Buffer("x", 4, dag.Of(dag.F16), dag.Zeros()))
		}, "not a whole number of f16 elements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bd := dag.New()
			tt.build(bd)
			_, err := bd.Build()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}
