package spec

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// errLines parses src and returns its errors as "line:col: message (hint)".
func errLines(t *testing.T, src string, opts ...Option) []string {
	t.Helper()
	s, err := Parse("t.yaml", []byte(src), opts...)
	require.NotNil(t, s)
	var got []string
	for _, e := range Errors(err) {
		got = append(got, strings.TrimPrefix(e.Error(), "t.yaml:"))
	}
	if err != nil {
		assert.Nil(t, s.Graph)
	}
	return got
}

const gemmBuffers = `buffers:
  a: {dtype: f32, count: 6, init: {value: 1}}
  b: {dtype: f32, count: 12, init: {value: 1}}
  c: {dtype: f32, count: 8, init: zeros}
  h: {dtype: f16, count: 8}
  p: {dtype: f32, count: 6, placement: pinned}
`

func TestGemmOp(t *testing.T) {
	cases := []struct {
		name, op string
		want     dag.GemmSpec
	}{
		{"plain", "{a: a, b: b, c: c, m: 2, n: 4, k: 3}",
			dag.GemmSpec{GemmShape: dag.GemmShape{M: 2, N: 4, K: 3}, Alpha: 1, LDA: 3, LDB: 4, LDC: 4, Batch: 1, StrideA: 6, StrideB: 12, StrideC: 8}},
		{"everything", "{a: a, b: b, c: c, d: \"c[0:32]\", m: 2, n: 4, k: 3, trans_a: true, trans_b: false, alpha: 0.5, beta: 2, lda: 2, ldb: 4, ldc: 4, tf32: true}",
			dag.GemmSpec{GemmShape: dag.GemmShape{M: 2, N: 4, K: 3}, TransA: true, Alpha: 0.5, Beta: 2, LDA: 2, LDB: 4, LDC: 4, Batch: 1, StrideA: 6, StrideB: 12, StrideC: 8, TF32: true, SeparateD: true}},
		{"batched", "{a: a, b: b, c: c, m: 1, n: 2, k: 3, batch: 2, stride_a: 3, stride_b: 6, stride_c: 4}",
			dag.GemmSpec{GemmShape: dag.GemmShape{M: 1, N: 2, K: 3}, Alpha: 1, LDA: 3, LDB: 2, LDC: 2, Batch: 2, StrideA: 3, StrideB: 6, StrideC: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(gemmBuffers+"ops:\n  - gemm: "+c.op+"\n"))
			require.NoError(t, err)
			op := s.Graph.Ops[0]
			require.Equal(t, dag.Gemm, op.Kind)
			assert.Equal(t, c.want, *op.Gemm)
			assert.Equal(t, "gemm0", op.Name)
		})
	}
}

func TestGemmErrors(t *testing.T) {
	cases := []struct{ name, op, want string }{
		{"missing", "{a: a, b: b, c: c, m: 2, n: 4}", "8:11: ops[0] gemm needs k (write gemm: {a: A, b: B, c: C, m: M, n: N, k: K})"},
		{"missing several", "{a: a, m: 2}", "8:11: ops[0] gemm needs b, c, n and k (write gemm: {a: A, b: B, c: C, m: M, n: N, k: K})"},
		{"small view", "{a: a, b: b, c: c, m: 2, n: 5, k: 2}", "8:27: ops[0]: view c holds 8 f32 elements, too few for the gemm 2x5x2 (a 2x5 matrix with leading dimension 5 needs 10 elements)"},
		{"m zero", "{a: a, b: b, c: c, m: 0, n: 4, k: 3}", "8:33: ops[0]: m = 0 is out of range (m is from 1 to 2147483647)"},
		{"dtypes", "{a: a, b: h, c: c, m: 2, n: 4, k: 3}", "8:21: ops[0]: h is f16 but a is f32 (give a, b, c (and d) one dtype)"},
		{"host memory", "{a: p, b: b, c: c, m: 2, n: 4, k: 3}", "8:15: ops[0]: p is pinned host memory, not memory of device 0 (copy it to a buffer on device 0 first)"},
		{"lda", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, lda: 2}", "8:53: ops[0]: lda = 2 is out of range (the stored matrix has 3 columns: lda is from 3 to 2147483647)"},
		{"stride zero", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, stride_a: 0}", "8:58: ops[0] gemm stride_a 0 is not positive (leave it out to pack the batch's matrices one after another)"},
		{"ldc negative", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, ldc: -4}", "8:53: ops[0] gemm ldc -4 is not positive (leave it out for the default)"},
		{"unknown key", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, transa: true}", `8:48: unknown field "transa" in ops[0] gemm (did you mean "trans_a"?)`},
		{"tf32 f16", "{a: \"h[0:2]\", b: \"h[2:4]\", c: \"h[4:6]\", m: 1, n: 1, k: 1, tf32: true}", "8:75: ops[0]: tf32 with f16 matrices (tf32 applies to f32 GEMMs only)"},
		{"d overlaps", "{a: a, b: b, c: \"c[0:16]\", m: 2, n: 2, k: 3, d: \"c[8:24]\", ldc: 2}", "8:59: ops[0]: d c[8:24] overlaps c c[0:16] partly (make d either exactly c or disjoint from it)"},
		{"alpha", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, alpha: .nan}", "8:55: ops[0]: alpha NaN is not finite"},
		{"beta type", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, beta: x}", "8:54: ops[0] gemm beta must be a number, not the string \"x\""},
		{"trans type", "{a: a, b: b, c: c, m: 2, n: 4, k: 3, trans_b: 1}", "8:57: ops[0] gemm trans_b must be a boolean, not the integer 1 (write true or false)"},
		{"not a mapping", "a", `8:11: ops[0] gemm must be a mapping, not the string "a"`},
		{"batch too large for b", "{a: a, b: b, c: c, m: 1, n: 4, k: 3, batch: 2, stride_c: 4}", "8:21: ops[0]: view b holds 12 f32 elements, too few for the gemm 1x4x3 x2 (a 3x4 matrix with leading dimension 4, 2 of them 12 elements apart, needs 24 elements)"},
		{"batch outputs overlap", "{a: a, b: b, c: c, m: 1, n: 2, k: 3, batch: 2, stride_a: 3, stride_b: 6, stride_c: 1}", "8:94: ops[0]: stride_c = 1 makes the batch's output matrices overlap (make stride_c at least 2 (one matrix after another))"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, []string{c.want}, errLines(t, gemmBuffers+"ops:\n  - gemm: "+c.op+"\n"))
		})
	}
	// The dtype is a's: an unsupported one is reported there.
	assert.Equal(t, []string{"4:15: ops[0]: gemm does not take i32 matrices (use f32, f64, f16 or bf16)"},
		errLines(t, "buffers:\n  i: {dtype: i32, count: 16}\nops:\n  - gemm: {a: \"i[0:16]\", b: \"i[16:32]\", c: \"i[32:64]\", m: 2, n: 2, k: 2}\n"))
}

func TestCollectiveOps(t *testing.T) {
	src := `run: {world: 2}
buffers:
  g: {dtype: f32, count: 8, init: {random: 1}}
  shard: {dtype: f32, count: 4, init: {random: 2}}
  whole: {dtype: f32, count: 8}
  i: {dtype: i64, count: 2, init: {value: 3}}
ops:
  - all_reduce: {view: g, op: avg}
  - all_reduce: {view: i}
  - all_gather: {in: shard, out: whole}
  - reduce_scatter: {in: whole, out: shard, op: max}
  - broadcast: {view: "g[0:16]", root: 1}
  - send: {view: shard, to: 1}
  - recv: {view: shard, from: 1}
    name: back
`
	s, err := Parse("t.yaml", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, 2, s.Run.World)
	var got []string
	for _, o := range s.Graph.Ops {
		got = append(got, dag.CollectiveSignature(o))
	}
	assert.Equal(t, []string{
		"all_reduce all_reduce0: 8 x f32, avg",
		"all_reduce all_reduce1: 2 x i64, sum",
		"all_gather all_gather2: 4 x f32 -> 8 x f32",
		"reduce_scatter reduce_scatter3: 8 x f32 -> 4 x f32, max",
		"broadcast broadcast4: 4 x f32, root 1",
		"send send5: 4 x f32, to 1",
		"recv back: 4 x f32, from 1",
	}, got)
	// A world of one accepts every collective whose sizes allow it.
	_, err = Parse("t.yaml", []byte(strings.Replace(strings.Replace(src, "world: 2", "world: 1", 1), "  - all_gather: {in: shard, out: whole}\n  - reduce_scatter: {in: whole, out: shard, op: max}\n  - broadcast: {view: \"g[0:16]\", root: 1}\n  - send: {view: shard, to: 1}\n  - recv: {view: shard, from: 1}\n    name: back\n", "", 1)))
	require.NoError(t, err)
}

func TestCollectiveErrors(t *testing.T) {
	const bufs = `buffers:
  a: {dtype: f32, count: 6, init: zeros}
  b: {dtype: f32, count: 12, init: zeros}
  c: {dtype: f32, count: 8}
  h: {dtype: f16, count: 8}
  p: {dtype: f32, count: 6, placement: pinned}
`
	cases := []struct {
		name, src string
		want      []string
	}{
		{"static", "run: {world: 2}\n" + bufs + `ops:
  - all_reduce: {view: c, op: summ}
  - all_gather: {in: a, out: b}
  - all_gather: {in: a, out: c}
  - recv: {view: a}
  - reduce_scatter: {in: p, out: a}
  - all_reduce: {view: h}
  - broadcast: {view: a, root: -1}
  - send: {view: a, to: x}
  - all_reduce: {buffer: a}
  - all_reduce: {view: a, split: 0}
  - all_gather: {in: a, out: b, split: 2}
`, []string{
			`9:31: ops[0] all_reduce op "summ" is not valid (did you mean "sum"?)`,
			`11:17: ops[2]: c (32 bytes) is not a whole multiple of a (24 bytes) (out must be world times in)`,
			`12:11: ops[3] recv needs from (write recv: {view: x, from: 0})`,
			`13:21: ops[4]: p is pinned host memory (collectives work on device memory; copy the data to a device buffer first)`,
			`15:32: ops[6] broadcast root -1 is out of range (use 0 to 65535)`,
			`16:25: ops[7] send to must be an integer, not the string "x"`,
			`17:17: ops[8] all_reduce needs view (write all_reduce: {view: g, op: sum})`,
			`17:18: unknown field "buffer" in ops[8] all_reduce (use one of view, op, split)`,
			`18:34: ops[9] all_reduce split 0 is out of range (use 1 to 64)`,
			`19:33: unknown field "split" in ops[10] all_gather (use one of in, out)`,
		}},
		{"world", "run: {world: 2}\n" + bufs + `ops:
  - all_gather: {in: "a[0:8]", out: b}
  - reduce_scatter: {in: b, out: "a[0:8]"}
  - broadcast: {view: a, root: 2}
  - send: {view: a, to: 5}
  - recv: {view: a, from: 3}
    name: r
`, []string{
			`9:17: ops[0]: out b holds 48 bytes; in a[0:8] times 2 ranks is 16 (make out 16 bytes (in times the world))`,
			`10:21: ops[1]: in b holds 48 bytes; out a[0:8] times 2 ranks is 16 (make in 16 bytes (out times the world))`,
			`11:32: ops[2]: root rank 2 is not in a world of 2 (name a rank below 2)`,
			`12:25: ops[3]: peer rank 5 is not in a world of 2 (name a rank below 2)`,
			`13:27: op "r": peer rank 3 is not in a world of 2 (name a rank below 2)`,
		}},
		{"world of one", bufs + "ops:\n  - broadcast: {view: a, root: 3}\n", []string{`8:32: ops[0]: root rank 3 is not in a world of 1 (name a rank below 1)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, errLines(t, c.src))
		})
	}
	assert.Equal(t, []string{`8:32: ops[0]: root rank 3 is not in a world of 3 (name a rank below 3)`},
		errLines(t, bufs+"ops:\n  - broadcast: {view: a, root: 3}\n", WithRank(1, 3)))
}

func TestWorld(t *testing.T) {
	cases := []struct {
		name, src string
		opts      []Option
		want      []string
	}{
		{"devices", "run: {world: 2}\nbuffers:\n  x: {size: 16, device: 1}\nops:\n  - fill: {buffer: x, value: 1}\n    device: 0\n", nil, []string{
			`3:25: buffer "x" has an explicit device, but the spec runs as a world of 2 ranks (leave device: out (each rank runs on its own device), or drop run.world to place work on several devices of one process)`,
			`6:13: ops[0] has an explicit device, but the spec runs as a world of 2 ranks (leave device: out (each rank runs on its own device), or drop run.world to place work on several devices of one process)`,
		}},
		{"devices, world from the option", "buffers:\n  x: {size: 16, device: 0}\nops:\n  - fill: {buffer: x, value: 1}\n", []Option{WithRank(0, 4)}, []string{
			`2:25: buffer "x" has an explicit device, but the spec runs as a world of 4 ranks (leave device: out (each rank runs on its own device), or drop run.world to place work on several devices of one process)`,
		}},
		{"devices, world 1", "run: {world: 1}\nbuffers:\n  x: {size: 16, device: 1}\nops:\n  - fill: {buffer: x, value: 1}\n", nil, nil},
		{"world range", "run: {world: 0}\nbuffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n", nil, []string{`1:14: run.world 0 is out of range (use 1 to 65536)`}},
		{"rank beyond", "run: {world: 2}\nbuffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n", []Option{WithRank(2, 0)}, []string{`1:14: rank 2 is not in a world of 2 (ranks are numbered 0 to 1)`}},
		{"rank negative", "buffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n", []Option{WithRank(-1, 0)}, []string{`1:1: rank -1 is not in a world of 1 (ranks are numbered 0 to 0)`}},
		{"world option range", "buffers: {x: 16}\nops: [{fill: {buffer: x, value: 1}}]\n", []Option{WithRank(0, -1)}, []string{`1:1: a world of -1 ranks was asked for (a world has 1 to 65536 ranks)`}},
		{"shared writes", "run: {world: 2}\nbuffers:\n  x: {size: 16, init: {random: {per_rank: true}}}\nops:\n  - host: save\n    buffer: x\n    path: out.bin\noutputs:\n  - {buffer: x, save: x.bin}\n", nil, []string{
			`3:32: buffer "x" init random has no seed (write {seed: 42, per_rank: true})`,
			`7:11: ops[0] save path out.bin: all 2 ranks would write this one file (put {rank} in the path, as in out_{rank}.bin)`,
			`9:23: output save x.bin: all 2 ranks would write this one file (put {rank} in the path, as in out_{rank}.bin)`,
		}},
		{"random keys", "buffers:\n  x: {size: 16, init: {random: {seed: -1, per_rank: 1, each: true}}}\nops: [{fill: {buffer: x, value: 1}}]\n", nil, []string{
			`2:39: buffer "x" init random seed -1 is negative (use a seed of 0 or more)`,
			`2:53: buffer "x" init random per_rank must be a boolean, not the integer 1 (write true or false)`,
			`2:56: unknown field "each" in buffer "x" init random (use one of seed, per_rank)`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, errLines(t, c.src, c.opts...))
		})
	}
}

// One spec, parsed per rank: {rank} in the paths it reads and writes, and
// per_rank random inits, differ by rank; the rest is the same.
func TestRanks(t *testing.T) {
	dir := t.TempDir()
	for r := range 2 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "in"+string(rune('0'+r))+".bin"), bytes.Repeat([]byte{byte(r + 1)}, 16), 0o644))
	}
	src := `run: {world: 2}
buffers:
  x: {size: 16, placement: pinned, init: {file: "in{rank}.bin"}}
  shared: {dtype: f32, count: 4, init: {random: 5}}
  own: {dtype: f32, count: 4, init: {random: {seed: 5, per_rank: true}}}
  same: {dtype: f32, count: 4, init: {random: {seed: 5, per_rank: false}}}
ops:
  - host: save
    buffer: x
    path: "out/x_{rank}.bin"
outputs:
  - {buffer: own, save: "own{rank}.bin"}
`
	path := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	base, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, 0, base.Rank)
	assert.Equal(t, 2, base.Run.World)
	var bufs [2]map[string][]byte
	for r := range 2 {
		s, err := base.ForRank(r)
		require.NoError(t, err)
		same, err := Load(path, WithRank(r, 0))
		require.NoError(t, err)
		assert.Equal(t, r, s.Rank)
		assert.Equal(t, s.Outputs[0].Save, same.Outputs[0].Save)
		assert.Equal(t, "own"+string(rune('0'+r))+".bin", s.Outputs[0].Save)
		bufs[r] = map[string][]byte{}
		for _, b := range s.Graph.Buffers {
			bufs[r][b.Name] = b.InitialBytes()
		}
		assert.Equal(t, bytes.Repeat([]byte{byte(r + 1)}, 16), bufs[r]["x"])
		// The save step writes the rank's file.
		require.NoError(t, s.Graph.Ops[0].HostFunc(context.Background(), [][]byte{bufs[r]["x"]}))
		got, err := os.ReadFile(filepath.Join(dir, "out", "x_"+string(rune('0'+r))+".bin"))
		require.NoError(t, err)
		assert.Equal(t, bufs[r]["x"], got)
	}
	assert.Equal(t, bufs[0]["shared"], bufs[1]["shared"])
	assert.Equal(t, bufs[0]["same"], bufs[1]["same"])
	assert.Equal(t, bufs[0]["shared"], bufs[0]["own"], "rank 0's per_rank stream is the plain seed's")
	assert.NotEqual(t, bufs[0]["own"], bufs[1]["own"])
	assert.Equal(t, "a_3_3.bin", ExpandRank("a_{rank}_{rank}.bin", 3))
}

// f16 and bf16 buffers: sizes, initial values, checksums and the add step.
func TestHalfPrecision(t *testing.T) {
	src := `buffers:
  h: {dtype: f16, count: 4, placement: pinned, init: {value: 1.5}}
  b: {dtype: bf16, count: 4, placement: pinned, init: {value: -2}}
  r: {dtype: bf16, count: 1000, init: {random: 7}}
ops:
  - host: add
    buffer: h
    value: 0.25
  - host: add
    buffer: b
    value: 0.5
  - host: checksum
    reads: [h, b]
`
	s, err := Parse("t.yaml", []byte(src))
	require.NoError(t, err)
	var out bytes.Buffer
	s.Stdout = &out
	h, b, r := s.Graph.Buffers[0], s.Graph.Buffers[1], s.Graph.Buffers[2]
	assert.Equal(t, int64(8), h.Size)
	assert.Equal(t, int64(2000), r.Size)
	hm, bm := h.InitialBytes(), b.InitialBytes()
	assert.Equal(t, uint16(0x3e00), binary.LittleEndian.Uint16(hm)) // 1.5
	assert.Equal(t, uint16(0xc000), binary.LittleEndian.Uint16(bm)) // -2
	ctx := context.Background()
	for _, o := range s.Graph.Ops[:2] {
		mem := hm
		if o.Access[0].Buf == b {
			mem = bm
		}
		require.NoError(t, o.HostFunc(ctx, [][]byte{mem}))
	}
	require.NoError(t, s.Graph.Ops[2].HostFunc(ctx, [][]byte{hm, bm}))
	assert.Equal(t, "checksum h: "+Checksum(hm, dag.F16).String()+"\nchecksum b: "+Checksum(bm, dag.BF16).String()+"\n", out.String())
	assert.Equal(t, 7.0, Checksum(hm, dag.F16).Sum)   // 4 x 1.75
	assert.Equal(t, -6.0, Checksum(bm, dag.BF16).Sum) // 4 x -1.5
	rs := Checksum(r.InitialBytes(), dag.BF16)
	assert.Greater(t, rs.Sum, 300.0, "1000 random bf16 values in [0, 1) sum to about 500")
	assert.Less(t, rs.Sum, 700.0)

	// Values beyond the dtype's range are refused where they are written.
	assert.Equal(t, []string{
		`2:35: buffer "h": initial value 70000 is beyond the largest f16 (65504) (use a value f16 holds)`,
		`5:30: ops[0]: fill value 1e+06 is beyond the largest f16 (65504) (fill h with a value f16 holds)`,
		`6:30: ops[1]: fill value 1e+39 is beyond the largest bf16 (fill b with a value bf16 holds)`,
	}, errLines(t, "buffers:\n  h: {dtype: f16, count: 4, init: {value: 70000}}\n  b: {dtype: bf16, count: 4}\nops:\n  - fill: {buffer: h, value: 1e6}\n  - fill: {buffer: b, value: 1e39}\n"))
}

// The layer builtins take f32, f16 and bf16 buffers from specs; Build picks
// the dtype's variant.
func TestLayerBuiltins(t *testing.T) {
	for _, dt := range []string{"f32", "f16", "bf16"} {
		t.Run(dt, func(t *testing.T) {
			src := strings.ReplaceAll(`buffers:
  x: {dtype: DT, count: 64, init: {random: 1}}
  y: {dtype: DT, count: 64}
  bias: {dtype: DT, count: 16, init: {value: 0.5}}
ops:
  - {launch: gelu, args: {y: y, x: x}}
  - {launch: relu, args: [y, y]}
  - {launch: bias_add, args: {y: y, b: bias}}
  - {launch: softmax, args: {y: y, x: x, cols: 16}}
outputs: [y]
`, "DT", dt)
			s, err := Parse("t.yaml", []byte(src))
			require.NoError(t, err)
			want, _ := dag.ParseDType(dt)
			var names []string
			for _, o := range s.Graph.Ops {
				names = append(names, o.Launch.Kernel.Name)
				assert.Equal(t, want, o.Launch.Kernel.ElemDType(), o.Name)
			}
			assert.Equal(t, []string{"gelu", "relu", "bias_add", "softmax"}, names)
		})
	}
	assert.Equal(t, []string{`5:26: ops[0]: y has 64 elements but x has 32; gelu needs views of equal size`},
		errLines(t, "buffers:\n  x: {dtype: f16, count: 32}\n  y: {dtype: f16, count: 64}\nops:\n  - {launch: gelu, args: {y: y, x: x}}\n"))
}

// Peers and roots may be expressions of rank and world: a ring's send and
// recv name the next and the previous rank of each rank's program.
func TestRankRelativePeers(t *testing.T) {
	const src = `params:
  N: {default: 2, min: 1, max: 8}
run: {world: 4}
buffers:
  s: {dtype: f32, count: 4, init: {random: {seed: 1, per_rank: true}}}
  r: {dtype: f32, count: 4, init: zeros}
ops:
  - send: {view: s, to: "(rank + 1) % world"}
  - recv: {view: r, from: "(rank + world - 1) % world"}
  - broadcast: {view: r, root: "world - N"}
`
	s, err := Parse("t.yaml", []byte(src))
	require.NoError(t, err)
	for rank := range 4 {
		rs, err := s.ForRank(rank)
		require.NoError(t, err)
		var got []string
		for _, o := range rs.Graph.Ops {
			got = append(got, dag.CollectiveSignature(o))
		}
		assert.Equal(t, []string{
			fmt.Sprintf("send send0: 4 x f32, to %d", (rank+1)%4),
			fmt.Sprintf("recv recv1: 4 x f32, from %d", (rank+3)%4),
			"broadcast broadcast2: 4 x f32, root 2",
		}, got, "rank %d", rank)
	}
	for _, c := range []struct{ to, want string }{
		{`"rank + 1"`, `8:25: ops[0] send to "rank + 1" is 4 at rank 3 of 4, out of the world (use 0 to 3)`},
		{`"rank / (world - 4)"`, `8:25: ops[0] send to "rank / (world - 4)" divides by zero at rank 3 of 4`},
		{`"rank + M"`, `8:25: ops[0] send to "rank + M": "M" is not a parameter of the spec`},
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(src, `"(rank + 1) % world"`, c.to, 1)), WithRank(3, 4))
		require.Error(t, err, c.to)
		assert.Contains(t, err.Error(), c.want, c.to)
	}
}
