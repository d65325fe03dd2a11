package spec

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
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

// collectiveSpec is one rank's program with every collective, their
// views, splits and peers depending on T and P, the run settings on P and
// S; at some values views overflow, peers leave the world and splits
// their range.
const collectiveSpec = `params:
  T: {default: 64, min: 16, max: 1099511627776, multiple_of: 16}
  P: {default: 1, min: 0, max: 5}
  S: {default: 2, min: 0, max: 100}
run: {world: 4, collective_sms: P * 4, repeat: S + 1}
buffers:
  g: {dtype: f32, count: T * 4, init: {random: {seed: 3, per_rank: true}}}
  s: {dtype: f32, count: T, init: zeros}
  r: {dtype: f32, count: T, init: zeros}
ops:
  - {all_reduce: {view: "g[0:T*8]", op: avg, split: S}, name: ar}
  - {all_gather: {in: s, out: "g[0:T*16]"}, priority: high}
  - {reduce_scatter: {in: {buffer: g, offset: 0, size: T * 16}, out: s, op: max}}
  - {broadcast: {view: s, root: P}, cost: 5us}
  - {send: {view: "s[0:T*2]", to: "(rank + P) % world"}}
  - {recv: {view: "r[T*T*T*T*T / (T*T*T*T*T) * 4:]", from: "(rank + world - P) % world"}}
  - {broadcast: {view: r, root: "rank * 0 + P - 1"}}
  - {all_reduce: {view: r, op: sum}, after: ar}
  - {send: {view: r, to: "(rank + 1) % (world - P)"}}
outputs: [{buffer: g, save: "g{rank}.bin"}]
`

// hostSpec has every host step, their views depending on T and U.
const hostSpec = `params:
  T: {default: 64, min: 16, max: 1099511627776, multiple_of: 16}
  U: {default: 1, min: 0, max: 4}
buffers:
  h: {dtype: f32, count: T * 4, placement: pinned, init: zeros}
  i: {dtype: i32, count: T, placement: pinned, init: {value: 3}}
  b: {dtype: bf16, count: 64, placement: pinned, init: zeros}
ops:
  - {host: add, buffer: "h[0:T*U*4]", value: 1.5, name: bump}
  - {host: add, buffer: i, value: -2}
  - {host: add, buffer: {buffer: b, offset: 0, size: T * 2 / U}, value: 0.25}
  - {host: checksum, reads: [h, "i[T:T*2]", {buffer: h, offset: T * 8, size: T * 8}]}
  - {host: checksum, reads: "b[0:T*U]", after: bump}
  - {host: save, buffer: "h[T*U:]", path: "out/h_{rank}.bin", priority: high}
  - {host: save, buffer: {buffer: i, offset: T * T * T * T - T * T * T * T, size: 4}, path: i.bin}
outputs: [{buffer: h, save: h.bin}]
`

// controlSpec has loops and branches, nested, their flags, bounds and
// bodies depending on T and M: at some values a flag or max is wrong (the
// bodies are read apart), or an op of a body is.
const controlSpec = `params:
  T: {default: 64, min: 16, max: 1099511627776, multiple_of: 16}
  M: {default: 32, min: 0, max: 1099511627776}
buffers:
  x: {size: T * 64, init: {value: 1}}
  y: T * 64
  flag: {size: 4, dtype: i32, init: {value: 1}}
  flags: {count: T / 4, dtype: i32, init: {value: 1}}
ops:
  - {fill: {buffer: y, value: 0}, name: clear}
  - while: "flags[T - 16 : T - 12]"
    max: M
    name: refine
    priority: low
    body:
      - {launch: scale, args: {x: "x[0:T*32]", alpha: 0.5}, grid: T / 16, name: s1}
      - {fill: {buffer: "x[T*32:]", value: 3}, after: [s1], cost: 1us}
      - {launch: set_flag, args: {flag: "flags[T-16:T-12]", x: x, threshold: 0.001}, block: 1}
      - if: flag
        then: [{copy: {from: "x[0:T*16]", to: "y[T*16:T*32]"}, name: inner}]
  - if: "flags[T - 4 + 0 / M : T]"
    then:
      - {launch: scale, args: {x: "y[0:T*M]", alpha: 2}, name: grow}
    else:
      - {copy: {from: x, to: y}}
      - while: flag
        body: [{fill: {buffer: "y[0:T]", value: 2}}, {memset2d: {buffer: "x[T:]", rows: M / 8, width: 4, pitch: T, value: 1}}]
outputs: [x, y]
`

// A load from recipes is the load that reads the text, at values it
// loads at and at values that make it wrong, with the errors at their
// places.
func TestRecipesAsRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		opts   []Option
		values []map[string]int64
		read   bool // the text is read at every load: recipes cannot make it
	}{
		{"every kind", recipeSpec, nil, []map[string]int64{
			{"T": 64}, {"T": 16}, {"T": 4096, "U": 8}, {"U": 1}, {"T": 1024, "U": 3},
			{"T": 17}, {"V": 2}, // not admitted: the declarations' errors
		}, false},
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
`, nil, []map[string]int64{{"T": 64}, {"T": 16}, {"T": 48}, {"T": 1024}, {"T": 1 << 20}, {"T": 1 << 40}}, false},
		{"collectives", collectiveSpec, nil, []map[string]int64{
			{"T": 64}, {"T": 16, "P": 2}, {"P": 0}, {"P": 3, "S": 64}, {"P": 4}, {"P": 5}, {"S": 0}, {"S": 65},
			{"T": 1 << 20}, {"T": 1 << 40, "S": 1},
		}, false},
		{"collectives at rank 3", collectiveSpec, []Option{WithRank(3, 4)}, []map[string]int64{
			{"T": 32}, {"P": 0}, {"P": 2}, {"P": 4}, {"P": 5}, {"T": 1 << 20},
		}, false},
		{"host steps", hostSpec, nil, []map[string]int64{
			{"T": 32}, {"U": 4}, {"U": 0}, {"T": 128, "U": 2}, {"T": 1 << 20}, {"T": 1 << 40, "U": 3},
		}, false},
		{"loops and branches", controlSpec, nil, []map[string]int64{
			{"T": 16}, {"M": 1}, {"M": 64}, {"M": 65}, {"M": 0}, {"M": 1 << 40}, {"M": 1<<40 + 1},
			{"T": 1 << 20, "M": 3}, {"T": 1 << 40},
		}, false},
		{"aliased bodies and views", `params:
  T: {default: 64, min: 16, max: 4096, multiple_of: 16}
buffers:
  x: {size: &sz T * 64, init: zeros}
  y: {size: *sz, init: zeros}
  flag: {size: 4, dtype: i32, init: {value: 1}}
ops:
  - while: &f "flag[0:T/16]"
    max: &m T / 16
    body: &b [{fill: {buffer: &v "x[0:T*32]", value: 1}}, {launch: scale, grid: *m, args: {x: *v, alpha: 2}}]
  - if: *f
    then: *b
    else: [{copy: {from: *v, to: "y[T*32:]"}}, {fill: {buffer: "y[0:T]", value: 3}}]
`, nil, []map[string]int64{{"T": 16}, {"T": 128}, {"T": 4096}}, false},
		{"a world of the parameters", `params:
  W: {default: 2, min: 1, max: 8}
run: {world: W}
buffers:
  g: {dtype: f32, count: 64, init: zeros}
ops:
  - {all_reduce: {view: g}}
  - {send: {view: g, to: "(rank + 1) % world"}}
`, nil, []map[string]int64{{"W": 1}, {"W": 8}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("p.yaml", []byte(tc.src), tc.opts...)
			require.NoError(t, err)
			require.Equal(t, tc.read, s.again.recipes == nil, "recipes make every kind of this spec")
			for _, v := range tc.values {
				sameAsRead(t, s, v)
			}
		})
	}
}

// The examples with parameters load from recipes, each rank's program
// of those that run as several, as they would from their text.
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
		specs := []*Spec{s}
		for r := 1; r < s.Run.World; r++ {
			at, err := Load(file, WithRank(r, s.Run.World))
			require.NoError(t, err, file)
			specs = append(specs, at)
		}
		for _, s := range specs {
			require.NotNil(t, s.again.recipes, "%s rank %d loads from recipes", file, s.Rank)
			made++
			for _, p := range s.Params {
				for _, x := range []int64{p.first(), p.Max / p.MultipleOf * p.MultipleOf, p.Default} {
					sameAsRead(t, s, map[string]int64{p.Name: x})
				}
			}
		}
	}
	require.GreaterOrEqual(t, made, 5, "mlp_stream.yaml and the tensor-parallel blocks, at ranks 0 and 1")
}

// Loads from one spec's recipes on several goroutines at once are each
// the load of the text at their values (the recipes are shared; run with
// -race).
func TestRecipesShared(t *testing.T) {
	for _, src := range []string{recipeSpec, collectiveSpec, hostSpec, controlSpec} {
		s, err := Parse("p.yaml", []byte(src))
		require.NoError(t, err)
		require.NotNil(t, s.again.recipes)
		values := make([]map[string]int64, 8)
		got := make([]*Spec, len(values))
		errs := make([]error, len(values))
		var wg sync.WaitGroup
		for i := range values {
			values[i] = map[string]int64{"T": int64(16 << i)}
			wg.Go(func() { got[i], errs[i] = s.At(values[i]) })
		}
		wg.Wait()
		for i := range values {
			sameLoad(t, s, values[i], got[i], errs[i])
		}
	}
}

// sameAsRead checks that s.At(values) is what loading s's text at values
// makes.
func sameAsRead(t *testing.T, s *Spec, values map[string]int64) {
	t.Helper()
	got, gotErr := s.At(values)
	sameLoad(t, s, values, got, gotErr)
}

// sameLoad checks that got and gotErr, a load of s's text at values, are
// what reading the text at values makes.
func sameLoad(t *testing.T, s *Spec, values map[string]int64, got *Spec, gotErr error) {
	t.Helper()
	what := fmt.Sprint(values)
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
	sameSteps(t, comparable(want), comparable(got), what)
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

// comparable takes from the ops of s (its graph's and its save steps'),
// and returns, what two loads cannot be compared by: the functions of
// host steps. A loop's or branch's spec keeps only what it exports,
// without the builders of its bodies (which keep their room).
func comparable(s *Spec) []*dag.Op {
	var ops []*dag.Op
	if s.Graph != nil {
		ops = append(slices.Clip(s.Graph.Ops), s.Graph.Nested...)
	}
	for _, st := range s.Saves {
		if !slices.Contains(ops, st.Op) {
			ops = append(ops, st.Op)
		}
	}
	var steps []*dag.Op
	for _, op := range ops {
		if c := op.Control; c != nil {
			op.Control = &dag.ControlSpec{Cond: c.Cond, Max: c.Max, Body: c.Body, Else: c.Else}
		}
		if op.HostFunc != nil {
			o := *op
			steps = append(steps, &o)
			op.HostFunc = nil
		}
	}
	return steps
}

// sameSteps checks that the host steps of two loads do the same: an add
// step changes the same bytes the same way (a checksum's and a save's
// are what they read, and where, which the graphs and Saves hold).
func sameSteps(t *testing.T, want, got []*dag.Op, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, w := range want {
		if len(w.Access) != 1 || w.Access[0].Mode != dag.ReadWrite {
			continue
		}
		mem := func(op *dag.Op) []byte {
			b := make([]byte, 64)
			for j := range b {
				b[j] = byte(j * 37)
			}
			require.NoError(t, op.HostFunc(t.Context(), [][]byte{b}), what)
			return b
		}
		require.Equal(t, mem(w), mem(got[i]), what)
	}
}

// A leaf's bounds are the values its check passes, and what the check
// keeps of them.
func TestCheckBounds(t *testing.T) {
	for _, c := range []numCheck{
		{}, {kind: checkRange, lo: 1, hi: 32}, {kind: checkRange, lo: 0, hi: 1 << 16},
		{kind: checkPositive, key: "lda"}, {kind: checkPositive, key: "stride_a"}, {kind: checkSize},
		{kind: checkCount, dt: dag.BF16}, {kind: checkCount, dt: dag.F64}, {kind: checkShared},
		{kind: checkFits, param: dag.I32Param}, {kind: checkFits, param: dag.I64Param}, {kind: checkIterations},
	} {
		lo, hi, mul := c.bounds()
		for _, v := range []int64{math.MinInt64, -1 << 31, -1<<31 - 1, -1, 0, 1, 2, 32, 33, 1 << 16, 1<<16 + 1, 1 << 30, 1<<30 + 1,
			1<<31 - 1, 1 << 31, dag.MaxIterations, dag.MaxIterations + 1, math.MaxInt64 / 8, math.MaxInt64/8 + 1, math.MaxInt64 / 2, math.MaxInt64/2 + 1, math.MaxInt64} {
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
