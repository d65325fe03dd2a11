package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, and that every error
// it reports is a positioned *Error.
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
		// Hostile and careless input (issue 12).
		"\ufeffbuffers: {x: {dtype: f64, count: 0x10, init: {value: 1e-3}}}\nops: [{fill: {buffer: x, value: .nan}}, {fill: {buffer: x, value: -.inf}}]\n",
		"buffers: {x: 9999999 TiB, y: {dtype: f64, count: 2305843009213693952}}\nops: [{fill: {buffer: x, value: 1e400}, cost: 1500000h}]\n",
		"buffers: {x: 16}\nops: [{launch: scale, args: {x: {buffer: x, offset: 9223372036854775807, size: 2}, alpha: 1}}]\n",
		"buffers: {h: {placement: pinned, init: {file: ../../etc/passwd}}}\nops: [{host: save, buffer: h, path: /tmp/x}]\noutputs: [{buffer: h, save: ../x}, {buffer: h, save: ../x}]\n",
		"run: {backend: gpu, repeat: 2}\nbuffers: {t: {size: 16, temporary: true}}\nops: [{alloc: t}, {alloc: *nope}]\n",
		"ops: [{fill: {buffer: " + strings.Repeat("b", 5000) + ", value: 1}}]\nbuffers: {" + strings.Repeat("c", 5000) + ": 16}\n",
	} {
		f.Add([]byte(src))
	}
	f.Add(deepFlow(200))
	f.Add(deepBlock(80))
	f.Add(aliasBomb(6))
	f.Add(aliasFanOut(20))
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := Parse("fuzz.yaml", src)
		if s == nil {
			t.Fatal("Parse returned no Spec")
		}
		if err == nil {
			if s.Graph == nil {
				t.Fatal("no error and no graph")
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
	})
}
