package spec

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4)
	for _, f := range files {
		s, err := Load(f)
		require.NoError(t, err, f)
		assert.Empty(t, s.Warnings, f)
		assert.NotEmpty(t, s.Graph.Ops, f)
		assert.NotEmpty(t, s.Outputs, f)
	}
}

func TestParse(t *testing.T) {
	src := `run:
  streams: 3
  shared_copy_streams: true
  repeat: 5
  backend: cpu
buffers:
  h:   {size: 1 KiB, placement: pinned, init: {random: 9}}
  d:   1KiB
  d1:  {dtype: f64, count: 128, device: 1, init: {value: 2.5}}
  i:   {dtype: i32, count: 4, placement: pageable, init: zeros}
  tmp: {size: 256, temporary: true, init: none}
ops:
  - copy: {from: h, to: d}
    name: up
  - launch: scale
    grid: [2, 1]
    block: 128
    shared: 1 KiB
    early_launch: true
    args: [d, 3]
    priority: 7
    cost: 1.5ms
    device: 0
  - fill: {buffer: "tmp[0:128]", value: 1}
    priority: low
  - launch: axpy
    args:
      y: {buffer: d, offset: 0, size: 256}
      x: tmp
      alpha: 2
  - host: add
    buffer: "i[4:]"
    value: 1
    after: up
outputs:
  - h
  - {buffer: d1, save: d1.bin}
`
	s, err := Parse("p.yaml", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, RunSettings{Streams: 3, SharedCopyStreams: true, Repeat: 5, Backend: "cpu", World: 1}, s.Run)
	g := s.Graph
	byName := map[string]*dag.Buffer{}
	for _, b := range g.Buffers {
		byName[b.Name] = b
	}
	assert.Equal(t, int64(1024), byName["h"].Size)
	assert.Equal(t, dag.Pinned, byName["h"].Placement)
	assert.Equal(t, dag.Init{Kind: dag.InitRandom, Seed: 9}, byName["h"].Init)
	assert.Equal(t, dag.Device, byName["d"].Placement)
	assert.Equal(t, int64(1024), byName["d1"].Size)
	assert.Equal(t, dag.F64, byName["d1"].DType)
	assert.Equal(t, 1, byName["d1"].Device)
	assert.Equal(t, dag.Pageable, byName["i"].Placement)
	assert.Equal(t, dag.InitZeros, byName["i"].Init.Kind)
	assert.True(t, byName["tmp"].Temporary)

	ops := map[string]*dag.Op{}
	for _, o := range g.Ops {
		ops[o.Name] = o
	}
	require.Contains(t, ops, "scale1")
	sc := ops["scale1"]
	assert.Equal(t, dag.Dim3{X: 2, Y: 1, Z: 1}, sc.Launch.Grid)
	assert.Equal(t, dag.Dim3{X: 128, Y: 1, Z: 1}, sc.Launch.Block)
	assert.Equal(t, 1024, sc.Launch.Shared)
	assert.True(t, sc.Launch.Early)
	assert.False(t, ops["axpy3"].Launch.Early, "early_launch is false unless given")
	assert.Equal(t, dag.Priority(7), sc.Priority)
	assert.Equal(t, 1500*time.Microsecond, sc.Cost)
	assert.Equal(t, 3.0, sc.Launch.Args[1].Float)
	assert.Equal(t, dag.Low, ops["fill2"].Priority)
	assert.Equal(t, dag.View{Buf: byName["tmp"], Offset: 0, Size: 128}, ops["fill2"].Access[0].View)
	ax := ops["axpy3"]
	assert.Equal(t, dag.Access{View: byName["d"].Slice(0, 256), Mode: dag.ReadWrite}, ax.Access[0])
	assert.Equal(t, dag.Access{View: byName["tmp"].All(), Mode: dag.Read}, ax.Access[1])
	add := ops["add4"]
	assert.Equal(t, dag.Host, add.Kind)
	assert.Equal(t, byName["i"].Slice(4, 12), add.Access[0].View)
	assert.Contains(t, add.Deps, int32(ops["up"].ID), "after: up")
	assert.Contains(t, ops, "alloc:tmp", "automatic alloc of the temporary")
	assert.Contains(t, ops, "free:tmp", "automatic free of the temporary")

	require.Len(t, s.Outputs, 2)
	assert.Equal(t, byName["h"], s.Outputs[0].Buffer)
	assert.Equal(t, Output{Buffer: byName["d1"], Save: "d1.bin", Pos: Position{"p.yaml", 37, 5}}, s.Outputs[1])

	pos, ok := s.OpPos("up")
	assert.True(t, ok)
	assert.Equal(t, Position{"p.yaml", 13, 5}, pos)
	pos, ok = s.OpPos("free:tmp")
	assert.True(t, ok)
	assert.Equal(t, Position{"p.yaml", 11, 3}, pos, "an added free is placed at its buffer")
	_, ok = s.OpPos("nothing")
	assert.False(t, ok)
}

func TestDefaults(t *testing.T) {
	s, err := Parse("d.yaml", []byte("buffers: {x: 64}\nops:\n  - launch: iota\n    args: {x: x, start: 0}\n"))
	require.NoError(t, err)
	assert.Equal(t, RunSettings{Repeat: 1, Backend: "auto", World: 1}, s.Run)
	l := s.Graph.Ops[0].Launch
	assert.Equal(t, dag.Dim3{X: 1, Y: 1, Z: 1}, l.Grid)
	assert.Equal(t, dag.Dim3{X: 256, Y: 1, Z: 1}, l.Block)
	assert.Equal(t, dag.F32, s.Graph.Buffers[0].DType)
	assert.Equal(t, "iota0", s.Graph.Ops[0].Name)
}

// Each case's errors, in order, as "line:col: message (hint)".
func TestErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"syntax", "ops: [\n", []string{`1:6: YAML: sequence end token ']' not found`}},
		{"a tab", "buffers:\n\tx: {size: 16}\nops: []\n",
			[]string{`2:1: YAML: found a tab ('\t') that cannot start any token (YAML indents with spaces, never tabs: replace the tab with spaces)`}},
		{"empty", "", []string{`1:1: the spec is empty (declare buffers and ops)`}},
		{"two documents", "ops: [{alloc: x}]\n---\nops: []\n",
			[]string{`3:1: a spec is one YAML document; this is a second one (put the whole spec in one document)`}},
		{"not a mapping", "- a\n- b\n", []string{`1:1: the spec must be a mapping, not a list`}},
		{"no ops", "buffers: {x: 4}\n",
			[]string{`1:1: the spec has no ops (add an ops: list of copy, fill, launch, alloc, free and host steps)`}},
		{"empty ops", "ops: []\n", []string{`1:6: ops is empty (add copy, fill, launch, alloc, free or host steps)`}},
		{"unknown top", "buffer: {}\nops: [{fill: {buffer: x, value: 1}}]\n", []string{
			`1:1: unknown field "buffer" in the spec (did you mean "buffers"?)`,
			`2:23: ops[0] fill buffer names unknown buffer "x"`,
		}},
		{"cycle", "buffers: {x: 16}\nops:\n  - fill: {buffer: x, value: 1}\n    name: a\n    after: b\n  - fill: {buffer: x, value: 2}\n    name: b\n",
			[]string{`5:12: op "a": dependency cycle: a -> b -> a (remove one of these after edges or reorder the operations)`}},
		{"after unknown", "buffers: {x: 16}\nops:\n  - fill: {buffer: x, value: 1}\n    name: first\n  - fill: {buffer: x, value: 2}\n    after: [frist]\n",
			[]string{`6:13: after names unknown op "frist" (did you mean "first"?)`}},
		{"use after free", "buffers:\n  t: {size: 16, temporary: true}\nops:\n  - alloc: t\n  - free: t\n  - fill: {buffer: t, value: 0}\n",
			[]string{`6:5: ops[2]: uses t after ops[1] freed it (move the free after the last use)`}},
		{"free persistent", "buffers:\n  x: 16\nops:\n  - free: x\n",
			[]string{`4:5: ops[0]: free of persistent buffer x (declare it temporary to allocate it inside the run)`}},
		{"views", "buffers: {x: 16, y: 16}\nops:\n  - copy: {from: \"x[8:32]\", to: y}\n  - copy: {from: \"x[4:2]\", to: y}\n  - copy: {from: \"x[a:b]\", to: y}\n  - copy: {from: \"x[0:4\", to: y}\n", []string{
			`3:18: ops[0] copy from range [8:32) is out of range (x holds bytes [0:16))`,
			`4:18: ops[1] copy from range [4:2) is empty (x holds bytes [0:16))`,
			`5:18: ops[2] copy from: view "x[a:b]": start: size "a" has no number (` + viewHint + `)`,
			`6:18: ops[3] copy from: view "x[0:4" does not end with ] (` + viewHint + `)`,
		}},
		{"copy sizes", "buffers: {x: 16, y: 8}\nops:\n  - copy: {from: x, to: y}\n",
			[]string{`3:5: ops[0]: copy of 16 bytes from x into 8 bytes of y (copy views of equal size)`}},
		{"types", "run: {streams: four, graph: yes, repeat: 0}\nbuffers:\n  x: {size: [1], device: -1, temporary: 1}\nops:\n  - launch: scale\n    grid: 0\n    block: [1, 2, 3, 4]\n    args: {x: x, alpha: two}\n", []string{
			`1:16: run.streams must be an integer, not the string "four"`,
			`1:29: run.graph must be a boolean, not the string "yes" (write true or false)`,
			`1:42: run.repeat 0 is out of range (use 1 to 2147483647)`,
			`3:13: buffer "x" size must be a size, not a list (` + sizeHint + `)`,
			`3:26: buffer "x" device -1 is out of range (use 0 to 65536)`,
			`3:41: buffer "x" temporary must be a boolean, not the integer 1 (write true or false)`,
			`6:11: ops[0] grid 0 is out of range (use 1 to 2147483647)`,
			`7:12: ops[0] block has 4 dimensions (write a number or [x], [x, y] or [x, y, z])`,
			`8:25: ops[0] argument alpha must be a number, not the string "two"`,
		}},
		{"early_launch", "buffers: {x: 16}\nops:\n  - launch: scale\n    early_launch: yes\n    args: {x: x, alpha: 2}\n", []string{
			`4:19: ops[0] early_launch must be a boolean, not the string "yes" (write true or false)`,
		}},
		{"sizes", "buffers:\n  a: {size: 4 XB}\n  b: {size: 1.5 B}\n  c: {size: 0}\n  d: {size: 4, count: 1}\n  e: {dtype: f64}\n  f: {dtype: int8, count: 99999999999999999}\nops: [{alloc: a}]\n", []string{
			`2:13: buffer "a" size: size "4 XB" has unknown unit "XB" (` + sizeHint + `)`,
			`3:13: buffer "b" size: size "1.5 B" is not a whole number of bytes (` + sizeHint + `)`,
			`4:13: buffer "c" size 0 is not positive (` + sizeHint + `)`,
			`5:16: buffer "d" has both size and count (give either size or dtype and count)`,
			`6:6: buffer "e" has no size (add size: 4 MiB, or dtype and count)`,
			`7:14: buffer "f" dtype "int8" is not valid (use one of u8, i32, i64, f32, f64, f16, bf16)`,
		}},
		{"temporary output", "buffers:\n  t: {size: 16, temporary: true}\nops:\n  - fill: {buffer: t, value: 0}\noutputs: [t]\n",
			[]string{`5:11: output t is a temporary buffer: it does not outlive the run (make it persistent, or copy it to a persistent buffer)`}},
		{"host on device", "buffers:\n  d: 16\nops:\n  - host: checksum\n    reads: d\n",
			[]string{`4:5: ops[0]: host step uses device buffer d (copy d to a pinned host buffer first)`}},
		{"host fields", "buffers:\n  h: {size: 16, placement: pinned}\nops:\n  - host: save\n    buffer: h\n  - host: checksum\n    reads: h\n    path: x\n  - host: chksum\n", []string{
			`4:5: ops[0] save needs path (write path: out.bin)`,
			`8:5: unknown field "path" in ops[1] (use one of host, name, after, priority, cost, device, reads)`,
			`9:11: ops[2] host step "chksum" is not valid (did you mean "checksum"?)`,
		}},
		{"pageable under graph", "run: {graph: true}\nbuffers:\n  h: {size: 16, placement: pageable}\n  d: 16\nops:\n  - copy: {from: h, to: d}\n",
			[]string{`6:5: ops[0]: copy between pageable host memory (h) and device 0 memory (d) is synchronous and cannot be captured in a graph; run.graph is true (make h placement: pinned)`}},
		{"kernels", "kernels:\n  scale: {cuda: x}\n  k:\n    cuda: 'extern \"C\" __global__ void k(float* x) {}'\n    params:\n      - {name: x, type: buffer, mode: in}\n      - {name: x, type: f32, mode: out}\n  two: {cuda: x, ptx: y.ptx}\n  p: {ptx: missing.ptx}\nops:\n  - launch: k\n", []string{
			`2:3: kernel "scale" is a builtin (builtins need no declaration; give your kernel another name)`,
			`7:16: parameter "x" is declared twice (give each parameter its own name)`,
			`7:36: kernel "k" param 1 is of type f32 and has no mode (only buffer parameters have a mode)`,
			`8:8: kernel "two" needs exactly one source, has 2 (give one of cuda (inline CUDA C), cuda_file, ptx or cubin)`,
			`9:12: kernel "p" ptx missing.ptx: no such file or directory (paths are relative to the spec's directory)`,
		}},
		{"args", "buffers: {x: 16}\nops:\n  - launch: scale\n    args: [x, 2, 3]\n  - launch: scale\n  - launch: scale\n    args: {x: x, alpa: 1}\n  - launch: scal\n", []string{
			`4:18: ops[0] passes 3 arguments to scale, which takes 2 (scale takes (x buffer inout, alpha f32))`,
			`5:5: ops[1]: missing argument x (buffer) of scale (scale takes (x buffer inout, alpha f32))`,
			`5:5: ops[1]: missing argument alpha (f32) of scale (scale takes (x buffer inout, alpha f32))`,
			`7:18: scale has no parameter "alpa" (did you mean "alpha"?)`, // and not that alpha is missing
			`8:13: ops[3] launches unknown kernel "scal" (did you mean "scale"?)`,
		}},
		{"arg mode", "buffers: {x: 16}\nops:\n  - launch: scale\n    args: {x: {buffer: x, mode: in}, alpha: 1}\n",
			[]string{`4:15: ops[0]: x is passed as in, but scale reads and writes it (pass it as inout)`}},
		{"launch on host memory", "buffers:\n  h: {size: 16, placement: pinned}\nops:\n  - launch: scale\n    args: {x: h, alpha: 2}\n",
			[]string{`5:15: ops[0]: h is pinned host memory, not memory of device 0 (copy it to a buffer on device 0 first)`}},
		{"aliases", "buffers:\n  x: &b {size: 16}\n  y: *b\n  z: *nope\nops:\n  - <<: {fill: {buffer: x, value: 1}}\n", []string{
			`4:6: alias *nope names no anchor (define the anchor with &nope before using it)`,
			`6:5: merge keys (<<) are not supported (write the keys out, or use an alias for the whole value)`,
			`6:5: ops[0] has no kind (give it one of copy, fill, memset2d, launch, alloc, free, host, gemm, all_reduce, all_gather, reduce_scatter, broadcast, send, recv, while or if)`,
		}},
		{"names", "buffers:\n  \"a b\": 16\n  x: 16\nops:\n  - fill: {buffer: x, value: 1}\n    name: \"1st\"\n  - fill: {buffer: x, value: 1}\n    name: f\n  - fill: {buffer: x, value: 1}\n    name: f\n", []string{
			`2:3: buffer name "a b" is not valid (` + nameHint + `)`,
			`6:11: op name "1st" is not valid (` + nameHint + `)`,
			`10:11: op name "f" is used twice; first at n.yaml:7:5 (give each op its own name)`,
		}},
		{"op fields", "buffers: {x: 16}\nops:\n  - fill: {buffer: x, value: 1}\n    priorty: high\n  - {filll: {buffer: x}}\n  - {fill: {buffer: x, value: 1}, alloc: x}\n", []string{
			`4:5: unknown field "priorty" in ops[0] (did you mean "priority"?)`,
			`5:5: ops[1] has no kind (give it one of copy, fill, memset2d, launch, alloc, free, host, gemm, all_reduce, all_gather, reduce_scatter, broadcast, send, recv, while or if)`,
			`5:6: unknown field "filll" in ops[1] (did you mean "fill"?)`,
			`6:35: ops[2] is both fill and alloc (split it into one op per kind)`,
		}},
		{"priority and cost", "buffers: {x: 16}\nops:\n  - fill: {buffer: x, value: 1}\n    priority: urgent\n    cost: 20\n  - fill: {buffer: x, value: 1}\n    cost: 3 parsecs\n", []string{
			`4:15: ops[0] priority "urgent" is not valid (use high, normal, low or an integer (higher runs first))`,
			`5:11: ops[0] cost must be a duration, not the integer 20 (` + durationHint + `)`,
			`7:11: ops[1] cost: duration "3 parsecs" is not valid (` + durationHint + `)`,
		}},
		{"builtin checks", "buffers: {c: 16, a: 16, b: 8}\nops:\n  - launch: add\n    args: {c: c, a: a, b: b}\n",
			[]string{`4:11: ops[0]: c has 4 elements but b has 2; add needs views of equal size`}},
		{"init", "buffers:\n  t: {size: 16, temporary: true, init: zeros}\n  u: {size: 16, init: ones}\n  v: {size: 16, init: {value: 1, random: 2}}\n  w: {size: 16, init: {random: -1}}\nops: [{alloc: t}]\n", []string{
			`2:40: buffer "t" is temporary and has no initial contents (fill it with an op after it is allocated, or make it persistent)`,
			`3:23: buffer "u" init "ones" is not valid (write none, zeros, {value: 1.5}, {random: 42}, {random: {seed: 42, per_rank: true}} or {file: data.bin})`,
			`4:23: buffer "v" init must have exactly one of [zeros value random file] (write none, zeros, {value: 1.5}, {random: 42}, {random: {seed: 42, per_rank: true}} or {file: data.bin})`,
			`5:32: buffer "w" init random seed -1 is negative (use a seed of 0 or more)`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := c.name[:1] + ".yaml"
			s, err := Parse(name, []byte(c.src))
			require.Error(t, err)
			require.NotNil(t, s)
			assert.Nil(t, s.Graph)
			var got []string
			for _, e := range Errors(err) {
				assert.Equal(t, name, e.Pos.File)
				got = append(got, strings.TrimPrefix(e.Error(), name+":"))
			}
			assert.Equal(t, c.want, got)
			assert.Equal(t, strings.Join(prefixed(name, c.want), "\n"), err.Error())
		})
	}
}

func prefixed(name string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = name + ":" + l
	}
	return out
}

func TestWarnings(t *testing.T) {
	src := "buffers:\n  h: {size: 16, placement: pageable, init: zeros}\n  p: {size: 16, placement: pinned}\n  d: 16\nops:\n  - copy: {from: h, to: d}\n  - copy: {from: d, to: p}\n  - copy: {from: p, to: h}\n"
	s, err := Parse("w.yaml", []byte(src))
	require.NoError(t, err)
	require.Len(t, s.Warnings, 1, "only the pageable <-> device copy")
	assert.Equal(t, `w.yaml:6:5: ops[0]: copy between pageable host memory (h) and device 0 memory (d) is synchronous and cannot be captured in a graph (make h placement: pinned)`,
		s.Warnings[0].Error())

	// Warnings come back with errors too.
	s, err = Parse("w.yaml", []byte(src+"  - fill: {buffer: nope, value: 0}\n"))
	require.Error(t, err)
	assert.Len(t, s.Warnings, 1, "warnings come in the same round as the errors")
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 32)
	for i := range data {
		data[i] = byte(i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w.bin"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.ptx"), []byte(".version 8.0"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.cu"), []byte("extern \"C\" __global__ void k() {}"), 0o644))
	specPath := filepath.Join(dir, "s.yaml")
	src := `buffers:
  w: {init: {file: w.bin}}
  x: {size: 32, init: {file: w.bin}}
  y: {size: 64, init: {file: w.bin}}
kernels:
  kp: {ptx: k.ptx, entry: kern}
  kc: {cuda_file: k.cu}
ops:
  - copy: {from: w, to: x}
`
	require.NoError(t, os.WriteFile(specPath, []byte(src), 0o644))
	_, err := Load(specPath)
	require.Error(t, err)
	assert.Equal(t, specPath+`:4:30: buffer "y" init file w.bin holds 32 bytes, the buffer 64 (make the file as large as the buffer, or leave the size out to take the file's)`, err.Error())

	require.NoError(t, os.WriteFile(specPath, []byte(strings.Replace(src, "  y: {size: 64, init: {file: w.bin}}\n", "", 1)), 0o644))
	s, err := Load(specPath)
	require.NoError(t, err)
	w := s.Graph.Buffers[0]
	assert.Equal(t, int64(32), w.Size, "the size is the file's")
	assert.Equal(t, data, w.InitialBytes())
	// Kernels that no op launches are not part of the graph; the loader
	// still reads and checks them.
	assert.Empty(t, s.Graph.Kernels)

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestKernelDeclaration(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k.ptx"), []byte(".version 8.0"), 0o644))
	src := `buffers: {x: 64}
kernels:
  k: {ptx: k.ptx, entry: kern, params: [{name: x, type: buffer, mode: out}, {name: n, type: i64}]}
ops:
  - {launch: k, args: {x: x, n: 16}}
`
	s, err := Parse(filepath.Join(dir, "s.yaml"), []byte(src))
	require.NoError(t, err)
	require.Len(t, s.Graph.Kernels, 1)
	k := s.Graph.Kernels[0]
	assert.Equal(t, dag.PTX, k.Source)
	assert.Equal(t, filepath.Join(dir, "k.ptx"), k.Path)
	assert.Equal(t, "kern", k.EntryName())
	assert.Equal(t, []dag.Param{{Name: "x", Kind: dag.BufferParam, Mode: dag.Write}, {Name: "n", Kind: dag.I64Param}}, k.Params)
	op := s.Graph.Ops[0]
	assert.Equal(t, dag.Write, op.Access[0].Mode, "the parameter's mode")
	assert.Equal(t, int64(16), op.Launch.Args[1].Int)
}

func f32s(vals ...float32) []byte {
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

func TestHostSteps(t *testing.T) {
	dir := t.TempDir()
	src := `buffers:
  h: {dtype: f32, count: 4, placement: pinned, init: zeros}
  n: {dtype: i32, count: 2, placement: pinned, init: zeros}
ops:
  - {host: add, buffer: "h[4:]", value: 1.5, name: add}
  - {host: add, buffer: n, value: -3, name: addn}
  - {host: save, buffer: h, path: h.bin, name: save}
  - {host: checksum, reads: [h, "h[0:8]"], name: sum}
`
	s, err := Parse("h.yaml", []byte(src))
	require.NoError(t, err)
	var out bytes.Buffer
	s.Stdout, s.SaveDir = &out, dir
	ops := map[string]*dag.Op{}
	for _, o := range s.Graph.Ops {
		ops[o.Name] = o
	}
	ctx := context.Background()
	h := f32s(1, 2, 3, 4)
	require.NoError(t, ops["add"].HostFunc(ctx, [][]byte{h[4:]}))
	assert.Equal(t, f32s(1, 3.5, 4.5, 5.5), h)
	n := []byte{5, 0, 0, 0, 1, 0, 0, 0}
	require.NoError(t, ops["addn"].HostFunc(ctx, [][]byte{n}))
	assert.Equal(t, []byte{2, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}, n, "5-3 = 2, 1-3 = -2")
	require.NoError(t, ops["save"].HostFunc(ctx, [][]byte{h}))
	saved, err := os.ReadFile(filepath.Join(dir, "h.bin"))
	require.NoError(t, err)
	assert.Equal(t, h, saved)
	require.NoError(t, ops["sum"].HostFunc(ctx, [][]byte{h, h[:8]}))
	assert.Equal(t, "checksum h: "+Checksum(h, dag.F32).String()+"\nchecksum h[0:8]: "+Checksum(h[:8], dag.F32).String()+"\n", out.String())
}

func TestChecksum(t *testing.T) {
	// FNV-1a 64 of the empty input is its offset basis; of "a" a published value.
	assert.Equal(t, Sum{FNV: 0xcbf29ce484222325}, Checksum(nil, dag.F32))
	assert.Equal(t, uint64(0xaf63dc4c8601ec8c), Checksum([]byte("a"), dag.U8).FNV)
	assert.Equal(t, 97.0, Checksum([]byte("a"), dag.U8).Sum)
	assert.Equal(t, 10.5, Checksum(f32s(1, 2, 3, 4.5), dag.F32).Sum)
	assert.Equal(t, -1.0, Checksum([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, dag.I32).Sum)
	i64 := make([]byte, 8)
	binary.LittleEndian.PutUint64(i64, uint64(1<<40))
	assert.Equal(t, float64(1<<40), Checksum(i64, dag.I64).Sum)
	f64 := make([]byte, 8)
	binary.LittleEndian.PutUint64(f64, math.Float64bits(0.25))
	assert.Equal(t, 0.25, Checksum(f64, dag.F64).Sum)
	assert.Equal(t, "bytes=4 sum=10.5 fnv=", Checksum(f32s(10.5), dag.F32).String()[:21])
}

// TestChecksumLarge: above 1 MiB the hash runs beside the sum; both must
// be what a plain walk over the bytes gives, for every dtype, with a
// trailing partial element left out of the sum.
func TestChecksumLarge(t *testing.T) {
	data := make([]byte, 3<<20+3)
	for i := range data {
		data[i] = byte(i*131+i>>9) & 0x3f // no NaN or infinity in any float dtype
	}
	h := fnv.New64a()
	h.Write(data)
	for _, dt := range dag.DTypes() {
		var want float64
		es := int(dt.Size())
		for i := 0; i+es <= len(data); i += es {
			want += dag.ElemValue(data[i:], dt)
		}
		got := Checksum(data, dt)
		assert.Equal(t, Sum{Bytes: len(data), Sum: want, FNV: h.Sum64()}, got, dt.String())
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"4096", 4096, ""},
		{"4 MiB", 4 << 20, ""},
		{"4MiB", 4 << 20, ""},
		{" 1 KB ", 1000, ""},
		{"1.5KiB", 1536, ""},
		{"2 GB", 2e9, ""},
		{"1 TiB", 1 << 40, ""},
		{"0 B", 0, ""},
		{"MiB", 0, `size "MiB" has no number`},
		{"4 mib", 4 << 20, ""},
		{"40G", 40e9, ""},
		{"40gb", 40e9, ""},
		{"40Gi", 40 << 30, ""},
		{"40 GIB", 40 << 30, ""},
		{"2k", 2000, ""},
		{"512b", 512, ""},
		{"4 XB", 0, `size "4 XB" has unknown unit "XB"`},
		{"4 Gb/s", 0, `size "4 Gb/s" has unknown unit "Gb/s"`},
		{"1.1 B", 0, `size "1.1 B" is not a whole number of bytes`},
		{"9999999999 GiB", 0, `size "9999999999 GiB" is too large`},
		{"1e3", 0, `size "1e3" is not a number of bytes`},
		{"-4", 0, `size "-4" is not a number of bytes`},
		{"", 0, `size "" has no number`},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		if notSize(c.in) {
			assert.Error(t, err, "notSize(%q), which parses", c.in)
		}
		if c.err != "" {
			assert.EqualError(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

// FuzzNotSize checks that what notSize refuses, parseSize refuses too:
// the loader skips parseSize there.
func FuzzNotSize(f *testing.F) {
	for _, s := range []string{"4096", " 1 KB ", ".5KiB", "T*8KiB", "2*T*8KiB", "T", "(4)", "4+4", "4 KiB/2", " 7%2", "", " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := parseSize(s); err == nil && notSize(s) {
			t.Fatalf("notSize(%q), which parseSize reads as %d", s, v)
		}
	})
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"20us": 20 * time.Microsecond, "1.5 ms": 1500 * time.Microsecond, "2s": 2 * time.Second, "7ns": 7} {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"20", "-1ms", "fast", ""} {
		_, err := parseDuration(in)
		assert.Error(t, err, in)
	}
}

func TestParseViewText(t *testing.T) {
	cases := []struct {
		in   string
		want viewText
		err  bool
	}{
		{"x", viewText{name: "x"}, false},
		{"x[0:1KiB]", viewText{name: "x", ranged: true, end: 1024, hasEnd: true}, false},
		{"x[ 1KiB : ]", viewText{name: "x", ranged: true, start: 1024}, false},
		{"x[:8]", viewText{name: "x", ranged: true, end: 8, hasEnd: true}, false},
		{"x[8]", viewText{}, true},
		{"x[0:1:2]", viewText{}, true},
		{"x[0:4", viewText{}, true},
		{"x]", viewText{}, true},
		{"x[0:4]]", viewText{}, true},
	}
	for _, c := range cases {
		got, err := parseViewText(c.in, parseSize)
		if c.err {
			assert.Error(t, err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"size", "dtype", "count", "placement"}
	assert.Equal(t, `did you mean "placement"?`, suggest("placment", keys))
	assert.Equal(t, `did you mean "size"?`, suggest("szie", keys), "a transposition counts one")
	assert.Equal(t, `did you mean "dtype"?`, suggest("DType", keys))
	assert.Equal(t, "use one of size, dtype, count, placement", suggest("colour", keys))
	assert.Equal(t, "", suggest("x", nil))
	assert.Equal(t, "use one of a", suggest("q", []string{"a"}), "one-letter names are never close")
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
}

func TestMemset2D(t *testing.T) {
	s, err := Parse("m.yaml", []byte(`buffers:
  x: {size: 1 KiB, dtype: u8}
ops:
  - memset2d: {buffer: "x[16:]", rows: 4, width: 10, pitch: 64 B, value: 9}
`))
	require.NoError(t, err)
	op := s.Graph.Ops[0]
	assert.Equal(t, dag.Memset2D, op.Kind)
	assert.Equal(t, &dag.Memset2DSpec{Rows: 4, Width: 10, Pitch: 64}, op.Memset2D)
	assert.Equal(t, 9.0, op.FillValue)
	assert.Equal(t, dag.View{Buf: op.Access[0].Buf, Offset: 16, Size: 3*64 + 10}, op.Access[0].View)

	for _, tc := range []struct{ op, want string }{
		{`{buffer: x, rows: 0, width: 1, pitch: 1, value: 0}`, "4:"},
		{`{buffer: x, rows: 2, width: 600, pitch: 600, value: 0}`, "does not fit"},
		{`{buffer: x, rows: 2, width: 1, value: 0}`, "memset2d needs pitch"},
		{`{buffer: x, rows: 2, width: 1, pitch: 1, value: 0, depth: 3}`, "depth"},
	} {
		_, err := Parse("m.yaml", []byte("buffers:\n  x: {size: 1 KiB, dtype: u8}\nops:\n  - memset2d: "+tc.op+"\n"))
		require.Error(t, err, tc.op)
		assert.Contains(t, err.Error(), tc.want, tc.op)
	}
}

// TestUndefinedReads: a spec whose op reads what nothing wrote fails to
// load at the op, saying what to do; init: none declares it on purpose.
func TestUndefinedReads(t *testing.T) {
	swapped := "buffers:\n  in: {size: 16, placement: pinned, init: {value: 1}}\n  x: 16\nops:\n  - copy: {from: x, to: in}\n"
	_, err := Parse("u.yaml", []byte(swapped))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "u.yaml:5:18: ops[0]: reads all of x, which nothing wrote before it and x has no init (if the copy meant to fill x from in, swap its arguments")

	chunks := "buffers:\n  in: {size: 16, placement: pinned, init: {value: 1}}\n  x: 16\nops:\n" +
		"  - copy: {from: \"in[0:8]\", to: \"x[0:8]\"}\n  - {launch: scale, args: {x: x, alpha: 2}}\n"
	_, err = Parse("u.yaml", []byte(chunks))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "u.yaml:6:")
	assert.Contains(t, err.Error(), "reads bytes 8:16 of x")

	declared := "buffers:\n  in: {size: 16, placement: pinned, init: none}\n  x: 16\n  t: {size: 16, temporary: true, init: none}\nops:\n  - copy: {from: in, to: x}\n  - copy: {from: t, to: x}\n"
	s, err := Parse("u.yaml", []byte(declared))
	require.NoError(t, err)
	assert.True(t, s.Graph.Buffers[0].Uninitialized)
	assert.Equal(t, dag.InitNone, s.Graph.Buffers[0].Init.Kind)
}
