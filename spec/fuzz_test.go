package spec

import (
	"os"
	"path/filepath"
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
	} {
		f.Add([]byte(src))
	}
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
