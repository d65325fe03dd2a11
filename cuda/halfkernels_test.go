//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// TestBuiltinSourceHasEveryVariant checks that every f16 and bf16 variant
// Build can pick is an entry of the library, with the base's parameters.
func TestBuiltinSourceHasEveryVariant(t *testing.T) {
	for _, k := range dag.Builtins() {
		if !k.HalfTypes() {
			continue
		}
		for _, dt := range []dag.DType{dag.F16, dag.BF16} {
			v := k.Variant(dt)
			require.NotNil(t, v, "%s %s", k.Name, dt)
			decl := `extern "C" __global__ void ` + v.EntryName() + "("
			require.Contains(t, builtinSource, decl)
			start := strings.Index(builtinSource, decl) + len(decl)
			params := strings.Split(builtinSource[start:start+strings.Index(builtinSource[start:], ")")], ",")
			want := 0
			for _, p := range k.Params {
				want++
				if p.Kind == dag.BufferParam {
					want++
					assert.Contains(t, params[want-2], "u16*", "%s passes its buffers as 16-bit elements", v.EntryName())
				}
			}
			assert.Len(t, params, want, "parameters of %s", v.EntryName())
		}
	}
	for _, tok := range []string{"SUF", "LD(", "ST(", "T*", "T_ELEM"} {
		assert.NotContains(t, builtinSource, tok, "template token left in the source")
	}
}

// TestHalfBuiltins runs the layer kernels and the half-precision variants
// on the GPU over odd launch shapes and compares them with the cpu
// backend: bit for bit, but for gelu and softmax, whose tanhf and expf are
// within 2 ulp on CUDA and correctly rounded in Go (8 f32 ulps relative
// plus 1e-6 absolute, and one step of the dtype when the results straddle
// a rounding point).
func TestHalfBuiltins(t *testing.T) {
	b := gpuBackend(t, CacheDir(t.TempDir()))
	const rows, cols = 37, 129
	const n = rows * cols
	dev := dag.OnDevice(0)
	kernels := []struct {
		name  string
		make  func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3)
		exact bool
	}{
		{"gelu", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			x := g.Buffer("x", n*dt.Size(), dev, dag.Of(dt), dag.Random(1))
			g.Launch(dag.Scale, grid, block, x, float32(8)) // spread to [0, 8)
			g.Launch(dag.Add, grid, block, x, x, g.Buffer("shift", n*dt.Size(), dev, dag.Of(dt), dag.Value(-4)))
			g.Launch(dag.Gelu, grid, block, g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Zeros()), x)
		}, false},
		{"gelu of views not 16-byte aligned", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			x := g.Buffer("x", n*dt.Size(), dev, dag.Of(dt), dag.Random(6))
			g.Launch(dag.Scale, grid, block, x, float32(-6))
			y := g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Zeros())
			g.Launch(dag.Gelu, grid, block, y.Slice(dt.Size(), (n-1)*dt.Size()), x.Slice(0, (n-1)*dt.Size()))
		}, false},
		{"axpy and add of views not 16-byte aligned", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			m := (n - 1) * dt.Size()
			x := g.Buffer("x", n*dt.Size(), dev, dag.Of(dt), dag.Random(10))
			y := g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Random(11))
			g.Launch(dag.Axpy, grid, block, y.Slice(dt.Size(), m), x.Slice(0, m), float32(-1.5))
			g.Launch(dag.Add, grid, block, g.Buffer("c", n*dt.Size(), dev, dag.Of(dt), dag.Zeros()), x, y)
		}, true},
		{"relu", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			x := g.Buffer("x", n*dt.Size(), dev, dag.Of(dt), dag.Random(2))
			g.Launch(dag.Axpy, grid, block, x, g.Buffer("ones", n*dt.Size(), dev, dag.Of(dt), dag.Value(1)), float32(-0.5))
			g.Launch(dag.Relu, grid, block, g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Zeros()), x)
		}, true},
		{"bias_add", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			y := g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Random(3))
			g.Launch(dag.BiasAdd, grid, block, y, g.Buffer("b", cols*dt.Size(), dev, dag.Of(dt), dag.Random(4)))
		}, true},
		{"bias_add of a view not 16-byte aligned, a bias of one element", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			y := g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Random(12))
			g.Launch(dag.BiasAdd, grid, block, y.Slice(dt.Size(), (n-cols)*dt.Size()), g.Buffer("b", cols*dt.Size(), dev, dag.Of(dt), dag.Random(13)))
			g.Launch(dag.BiasAdd, grid, block, y, g.Buffer("one", dt.Size(), dev, dag.Of(dt), dag.Value(0.25)))
		}, true},
		{"softmax", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			x := g.Buffer("x", n*dt.Size(), dev, dag.Of(dt), dag.Random(5))
			g.Launch(dag.Scale, grid, block, x, float32(10))
			g.Launch(dag.Softmax, grid, block, g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Zeros()), x, cols)
		}, false},
		{"iota and scale", func(g *dag.Builder, dt dag.DType, grid, block dag.Dim3) {
			x := g.Buffer("y", n*dt.Size(), dev, dag.Of(dt), dag.Zeros())
			g.Launch(dag.Iota, grid, block, x, float32(-100.25))
			g.Launch(dag.Scale, grid, block, x, float32(0.3))
		}, true},
	}
	shapes := []struct{ grid, block dag.Dim3 }{
		{dag.Grid1(1), dag.Grid1(1)},
		{dag.Grid1(40), dag.Grid1(256)},
		{dag.Dim(3, 2, 2), dag.Dim(7, 3, 2)},
	}
	for _, dt := range []dag.DType{dag.F32, dag.F16, dag.BF16} {
		for _, k := range kernels {
			for _, s := range shapes {
				t.Run(fmt.Sprintf("%s/%s/%vx%v", k.name, dt, s.grid, s.block), func(t *testing.T) {
					g := dag.New()
					k.make(g, dt, s.grid, s.block)
					graph, err := g.Build()
					require.NoError(t, err)
					p, err := planner.New(graph)
					require.NoError(t, err)
					want, err := executor.Execute(context.Background(), cpu.New(), p)
					require.NoError(t, err)
					got, err := executor.Execute(context.Background(), b, p)
					require.NoError(t, err)
					for _, buf := range graph.Buffers {
						if k.exact {
							require.Equal(t, want[buf], got[buf], "%s", buf.Name)
							continue
						}
						es := dt.Size()
						for i := int64(0); i < buf.Size/es; i++ {
							w, x := dag.ElemValue(want[buf][i*es:], dt), dag.ElemValue(got[buf][i*es:], dt)
							// gelu's 1 + tanh cancels for negative x, so its
							// error is absolute: 2 ulp of tanh times 0.5|x| <= 2.
							tol := 4*0x1p-23*math.Abs(w) + 1e-6
							switch dt {
							case dag.F16:
								tol += 0x1p-10 * math.Abs(w)
							case dag.BF16:
								tol += 0x1p-7 * math.Abs(w)
							}
							require.InDelta(t, w, x, tol, "%s[%d]", buf.Name, i)
						}
					}
				})
			}
		}
	}
}
