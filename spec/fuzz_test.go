package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, that every error it
// reports is a positioned *Error, and that a spec with parameters loads
// at other values (At) as its text does.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, src := range []string{
		"",
		"ops: [{alloc: x}]",
		"buffers: {x: &a {size: 16}, y: *a}\nops: [{fill: {buffer: \"x[0:8]\", value: 1}, after: [z]}]",
		"a: &a [*a]\nops: *a",
		"buffers:\n  t: {size: 1 KiB, temporary: true}\nops:\n  - alloc: t\n  - free: t\n  - free: t\n",
		"kernels: {k: {cuda: x, params: [{name: x, type: buffer}]}}\nops: [{launch: k, args: [x]}]",
		"ops:\n  - launch: matmul\n    args: {c: c, a: a, b: b, m: 2, n: 2, k: 2}\n",
		// Hostile and careless input.
		"\ufeffbuffers: {x: {dtype: f64, count: 0x10, init: {value: 1e-3}}}\nops: [{fill: {buffer: x, value: .nan}}, {fill: {buffer: x, value: -.inf}}]\n",
		"buffers: {x: 9999999 TiB, y: {dtype: f64, count: 2305843009213693952}}\nops: [{fill: {buffer: x, value: 1e400}, cost: 1500000h}]\n",
		"buffers: {x: 16}\nops: [{launch: scale, args: {x: {buffer: x, offset: 9223372036854775807, size: 2}, alpha: 1}}]\n",
		"buffers: {h: {placement: pinned, init: {file: ../../etc/passwd}}}\nops: [{host: save, buffer: h, path: /tmp/x}]\noutputs: [{buffer: h, save: ../x}, {buffer: h, save: ../x}]\n",
		"run: {backend: gpu, repeat: 2}\nbuffers: {t: {size: 16, temporary: true}}\nops: [{alloc: t}, {alloc: *nope}]\n",
		// GEMMs, collectives, worlds and ranks.
		"buffers: {a: {dtype: bf16, count: 6}, b: {dtype: bf16, count: 12}, c: {dtype: bf16, count: 8}}\nops: [{gemm: {a: a, b: b, c: c, d: c, m: 2, n: 4, k: 3, trans_a: true, trans_b: false, alpha: 0.5, beta: 1, lda: 3, ldb: 4, ldc: 4, batch: 1, stride_a: 6, stride_b: 12, stride_c: 8, tf32: false}}]\n",
		"buffers: {a: {dtype: f16, count: 6}, b: {dtype: f16, count: 12}, c: {dtype: f16, count: 8}, v: {dtype: f16, count: 4}}\nops: [{gemm: {a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias_gelu, bias: v}}, {gemm: {a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: relu, bias: \"v[2:]\"}}, {gemm: {a: a, b: b, c: c, m: 2, n: 4, k: 3, epilogue: bias}}]\n",
		"buffers: {a: {dtype: f32, count: 6}}\nops: [{gemm: {a: a, b: a, c: a, m: 4294967296, n: -1, k: 0x7fffffff, batch: 9223372036854775807, stride_c: 9223372036854775807, ldc: 1e18}}]\n",
		"run: {world: 2}\nbuffers: {g: {dtype: f32, count: 8, init: {random: {seed: 3, per_rank: true}}}, s: {dtype: f32, count: 4}}\nops: [{all_reduce: {view: g, op: avg}}, {all_gather: {in: s, out: g}}, {reduce_scatter: {in: g, out: s, op: min}}, {broadcast: {view: g, root: 1}}, {send: {view: s, to: 1}}, {recv: {view: s, from: 0}}]\noutputs: [{buffer: g, save: \"g{rank}.bin\"}]\n",
		"run: {world: 3}\nbuffers: {s: {dtype: f32, count: 4, init: zeros}, r: {dtype: f32, count: 4}}\nops: [{send: {view: s, to: \"(rank + 1) % world\"}}, {recv: {view: r, from: \"(rank + world - 1) % (world - 3)\"}}, {broadcast: {view: s, root: \"rank * 99999999999 * 99999999999\"}}]\n",
		"run: {world: 65537}\nbuffers: {g: {size: 16, device: 1, init: {file: \"in{rank}{rank}.bin\"}}}\nops: [{broadcast: {view: g, root: 70000}, device: 2}, {host: save, buffer: g, path: out.bin}]\n",
		"ops: [{fill: {buffer: " + strings.Repeat("b", 5000) + ", value: 1}}]\nbuffers: {" + strings.Repeat("c", 5000) + ": 16}\n",
		// 2-D memsets: one that fits, and sizes at the edges.
		"buffers: {x: {size: 1 KiB, dtype: u8}}\nops: [{memset2d: {buffer: \"x[16:]\", rows: 4, width: 10, pitch: 64 B, value: 9}}]\n",
		"buffers: {x: {size: 64, dtype: i32}}\nops: [{memset2d: {buffer: x, rows: 9223372036854775807, width: 4294967296, pitch: 1 EiB, value: -1e40}}]\n",
		// Loops and branches: nested, aliased, wrong in their bodies and flags.
		loopSpec,
		"buffers: {x: 64, flag: {size: 4, dtype: i32}}\nops: [{while: flag, max: 3, body: [{if: flag, then: [{fill: {buffer: x, value: 1}}], else: [{launch: set_flag, args: {flag: flag, x: x, threshold: 0}}]}]}]\n",
		"buffers: {x: 64, flag: {size: 4, dtype: i32}}\nops: [{while: flag, body: &b [{fill: {buffer: x, value: 1}, name: a}]}, {if: flag, then: *b, else: *b}]\n",
		"buffers: {x: 64, h: {size: 64, placement: pinned}, flag: {size: 4, dtype: i32}}\nops: [{while: x, max: 1099511627777, body: []}, {if: flag, then: [{host: checksum, reads: h}, {alloc: x}], after: [a]}, {while: flag, body: [{copy: {from: h, to: x}, after: b, name: a}]}]\n",
		"buffers: {x: 64, flag: {size: 4, dtype: i32}}\nops: [{while: flag, body: {fill: x}}, {while: [flag], body: [[]]}, {if: flag, then: [{while: flag, then: []}]}]\n",
		nestedLoops(MaxNesting + 2),
		// Parameters: loads at other values from recipes.
		recipeSpec,
		paramSpec,
		collectiveSpec,
		hostSpec,
		controlSpec,
	} {
		f.Add([]byte(src))
	}
	f.Add(deepFlow(200))
	f.Add(deepBlock(80))
	f.Add(aliasBomb(6))
	f.Add(aliasFanOut(20))
	f.Fuzz(func(t *testing.T, src []byte) {
		check(t, src)
		check(t, src, WithRank(1, 2))
	})
}

// check parses src with opts and fails on a panic, a missing Spec, or an
// error that is not a positioned *Error.
func check(t *testing.T, src []byte, opts ...Option) {
	s, err := Parse("fuzz.yaml", src, opts...)
	if s == nil {
		t.Fatal("Parse returned no Spec")
	}
	if err == nil {
		if s.Graph == nil {
			t.Fatal("no error and no graph")
		}
		for _, p := range s.Params {
			for _, v := range []int64{p.first(), p.Max / p.MultipleOf * p.MultipleOf} {
				sameAsRead(t, s, map[string]int64{p.Name: v})
			}
		}
		return
	}
	errs := Errors(err)
	if len(errs) == 0 {
		t.Fatalf("error without *Error values: %v", err)
	}
	for _, e := range errs {
		if e.Pos.File != "fuzz.yaml" || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
			t.Fatalf("badly positioned error %#v", e)
		}
	}
}
