package spec

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// recipeSpec has every kind of op and way of writing a value that recipes
// make again, each depending on T or U where it can.
const recipeSpec = `params:
  T: {default: 64, min: 16, max: 4096, multiple_of: 16}
  U: {default: 2, min: 1, max: 8}
buffers:
  h: {dtype: f32, count: T * U * 4, placement: pinned, init: {random: {seed: 3, per_rank: true}}}
  p: {size: "T * 16", placement: pageable, init: zeros}
  d: {dtype: f32, count: T * U * 4}
  e: {size: "T * 64 B", init: zeros}
  k: {size: 4 KiB, init: {value: 1.5}}
  t: {size: "(T + 15) / 16 * 64", temporary: true}
  a: {dtype: bf16, count: T * 64, init: {random: 4}}
  b: {dtype: bf16, count: 64 * 32 * 8, init: {random: 5}}
  c: {dtype: bf16, count: T * 32, init: zeros}
  o: {dtype: bf16, count: T * 32}
  v: {dtype: bf16, count: 32, init: {value: 0.5}}
  m: {dtype: f32, count: 4096, init: {value: 1}}
ops:
  - {copy: {from: "h[0:T*U*16]", to: d}, name: up}
  - {copy: {from: "h[ T*16 : ]", to: "d[0:T*U*16 - T*16]"}, priority: high}
  - {copy: {from: p, to: "e[T*8:T*24]"}, cost: 20us}
  - fill: {buffer: {buffer: e, offset: T * 4, size: "T * 4"}, value: 2}
  - {fill: {buffer: "e[:T*2]", value: 1}, after: up}
  - memset2d: {buffer: "e[T:]", rows: U, width: T / 4, pitch: T * 2 B, value: 7}
  - {alloc: t}
  - {fill: {buffer: t, value: 0}, name: clear}
  - {launch: scale, grid: (T * U + 255) / 256, block: [256], args: {x: "t[0:(T + 15) / 16 * 32]", alpha: 0.5}}
  - {launch: axpy, grid: [U, 1, 1], block: 128, shared: T * 4, early_launch: true, args: [{buffer: d, mode: inout}, {buffer: e, offset: 0, size: T * U * 16}, 2]}
  - {free: t, device: 0}
  - gemm: {a: a, b: b, c: c, d: o, m: T, n: 32, k: 64, alpha: 0.5, beta: 1, trans_b: false, epilogue: bias_gelu, bias: v, lda: 64, ldb: 32, ldc: 32}
  - gemm: {a: "a[0:T*64*2]", b: b, c: o, m: T / U, n: 32, k: 64, batch: U, stride_a: T / U * 64, stride_b: 0 + 1 - 1 + 2048, stride_c: T / U * 32, tf32: false}
  - {launch: matmul, args: {c: "m[8KiB:8KiB + U * 256]", a: "m[0:1KiB]", b: "m[1KiB:1KiB + U*256]", m: 16, n: U * 4, k: 16}, name: mm}
  - {copy: {from: d, to: h}, name: down}
outputs:
  - h
  - {buffer: o}
`

// A load from recipes is the load that reads the text, at values it
// loads at and at values that make it wrong, with the errors at their
// places.
func TestRecipesAsRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		values []map[string]int64
	}{
		{"every kind", recipeSpec, []map[string]int64{
			{"T": 64}, {"T": 16}, {"T": 4096, "U": 8}, {"U": 1}, {"T": 1024, "U": 3},
			{"T": 17}, {"V": 2}, // not admitted: the declarations' errors
		}},
		{"wrong at some values", `params:
  T: {default: 64, min: 16, max: 1099511627776}
buffers:
  x: {dtype: f32, count: T - 32}
  y: "T * 4"
  z: {size: 1 KiB, init: zeros}
  w: {size: "T * T * T * T", init: none}
ops:
  - {copy: {from: "z[0:T*4]", to: "y[0:T*4]"}}
  - {copy: {from: "z[T:T*2]", to: {buffer: y, offset: T * 2, size: T}}}
  - {fill: {buffer: "x[T*T*T*T*T / (T*T*T*T*T) * 4:]", value: 1}}
  - {launch: scale, grid: T * 1000000, args: {x: y, alpha: 1}}
  - {launch: iota, block: [T / 16, 1, T / 16], shared: T * T * 4, args: {x: w, start: 0}}
  - {memset2d: {buffer: z, rows: T / 16, width: T / 8, pitch: T - 16, value: 0}}
  - {gemm: {a: y, b: y, c: x, m: T - 48, n: 1, k: 1, lda: T / 64, batch: T / 64}}
  - {fill: {buffer: w, value: 0}}
`, []map[string]int64{{"T": 64}, {"T": 16}, {"T": 48}, {"T": 1024}, {"T": 1 << 20}, {"T": 1 << 40}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("p.yaml", []byte(tc.src))
			require.NoError(t, err)
			require.NotNil(t, s.again.recipes, "recipes make every kind of this spec")
			for _, v := range tc.values {
				sameAsRead(t, s, v)
			}
		})
	}
}

// The examples with parameters load from recipes, or read their text
// where recipes do not know what they hold (collectives), as they would.
func TestRecipesExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	ranks, err := filepath.Glob("../examples/ranks/*.yaml")
	require.NoError(t, err)
	made := 0
	for _, file := range append(files, ranks...) {
		s, err := Load(file)
		if err != nil || len(s.Params) == 0 {
			continue
		}
		if s.again.recipes != nil {
			made++
		}
		for _, p := range s.Params {
			for _, x := range []int64{p.first(), p.Max / p.MultipleOf * p.MultipleOf, p.Default} {
				sameAsRead(t, s, map[string]int64{p.Name: x})
			}
		}
	}
	require.NotZero(t, made, "mlp_stream.yaml loads from recipes")
}

// sameAsRead checks that s.At(values) is what loading s's text at values
// makes.
func sameAsRead(t *testing.T, s *Spec, values map[string]int64) {
	t.Helper()
	what := fmt.Sprint(values)
	got, gotErr := s.At(values)
	opts := slices.Clip(s.opts)
	for _, name := range slices.Sorted(maps.Keys(values)) {
		opts = append(opts, WithParam(name, values[name]))
	}
	for _, p := range s.Params {
		if _, given := values[p.Name]; !given {
			opts = append(opts, WithParam(p.Name, p.Value))
		}
	}
	src, err := os.ReadFile(s.File)
	if err != nil {
		src = s.src
	}
	want, wantErr := Parse(s.File, src, opts...)
	require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), what)
	require.Equal(t, want.Graph, got.Graph, what)
	require.Equal(t, want.Warnings, got.Warnings, what)
	require.Equal(t, want.Params, got.Params, what)
	require.Equal(t, want.Run, got.Run, what)
	require.Equal(t, want.Outputs, got.Outputs, what)
	require.Equal(t, want.Saves, got.Saves, what)
	require.Equal(t, want.reads, got.reads, what)
	require.Equal(t, want.writes, got.writes, what)
	require.Equal(t, want.ops, got.ops, what)
	if got.Graph != nil {
		for _, op := range got.Graph.Ops {
			wp, wok := want.OpPos(op.Name)
			gp, gok := got.OpPos(op.Name)
			require.Equal(t, wok, gok, what)
			require.Equal(t, wp, gp, what)
			require.Equal(t, want.OpLabel(op.Name), got.OpLabel(op.Name), what)
		}
	}
}

// A leaf's bounds are the values its check passes, and what the check
// keeps of them.
func TestCheckBounds(t *testing.T) {
	for _, c := range []numCheck{
		{}, {kind: checkRange, lo: 1, hi: 32}, {kind: checkRange, lo: 0, hi: 1 << 16},
		{kind: checkPositive, key: "lda"}, {kind: checkPositive, key: "stride_a"}, {kind: checkSize},
		{kind: checkCount, dt: dag.BF16}, {kind: checkCount, dt: dag.F64}, {kind: checkShared},
		{kind: checkFits, param: dag.I32Param}, {kind: checkFits, param: dag.I64Param},
	} {
		lo, hi, mul := c.bounds()
		for _, v := range []int64{math.MinInt64, -1 << 31, -1<<31 - 1, -1, 0, 1, 2, 32, 33, 1 << 16, 1<<16 + 1, 1 << 30, 1<<30 + 1,
			1<<31 - 1, 1 << 31, math.MaxInt64 / 8, math.MaxInt64/8 + 1, math.MaxInt64 / 2, math.MaxInt64/2 + 1, math.MaxInt64} {
			r := &reader{file: "p.yaml"}
			got, ok := c.apply(r, v)
			require.Equal(t, v >= lo && v <= hi, ok, "%+v at %d", c, v)
			require.Equal(t, ok, len(r.errs) == 0, "%+v at %d reports what it refuses", c, v)
			if ok {
				require.Equal(t, v*mul, got, "%+v at %d", c, v)
			}
		}
	}
}
