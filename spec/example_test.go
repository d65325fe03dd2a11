package spec_test

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/spec"
)

func ExampleParse() {
	src := `buffers:
  h_in:  {size: 1 KiB, placement: pinned, init: {random: 1}}
  d_x:   1 KiB
ops:
  - copy: {from: h_in, to: d_x}
    name: upload
  - launch: scale
    args: {x: d_x, alpha: 2}
outputs: [d_x]
`
	s, err := spec.Parse("pipeline.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range s.Graph.Ops {
		fmt.Println(op.Name, op.Kind, op.Deps)
	}
	// Output:
	// upload copy []
	// scale1 launch [0]
}

// Every mistake comes back at once, each with its place in the file.
func ExampleErrors() {
	src := `buffers:
  x: {size: 4 KiB, placment: pinned}
  y: 4 KB
ops:
  - copy: {from: x, to: z}
  - launch: scal
`
	_, err := spec.Parse("bad.yaml", []byte(src))
	for _, e := range spec.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// bad.yaml:2:20: unknown field "placment" in buffer "x" (did you mean "placement"?)
	// bad.yaml:5:25: ops[0] copy to names unknown buffer "z" (use one of x, y)
	// bad.yaml:6:13: ops[1] launches unknown kernel "scal" (did you mean "scale"?)
}

// Paths in a spec stay inside its directory unless the person running it
// allows another tree (the CLI's --allow-path); every problem comes back
// in one ErrorList, ordered by position.
func ExampleParse_files() {
	src := `buffers:
  w: {placement: pinned, init: {file: ../secret.bin}}
ops:
  - {fill: {buffer: w, value: 1}}
  - {fill: {buffer: nope, value: 1}}
outputs:
  - {buffer: w, save: /etc/w.bin}
`
	_, err := spec.Parse("specs/pipeline.yaml", []byte(src), spec.WithSaveDir("out"))
	var list spec.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Printf("%s: %s\n", e.Pos, e.Msg)
		}
	}
	// Output:
	// specs/pipeline.yaml:2:39: buffer "w" init file ../secret.bin leaves the spec's directory
	// specs/pipeline.yaml:5:21: ops[1] fill buffer names unknown buffer "nope"
	// specs/pipeline.yaml:7:23: output save /etc/w.bin is an absolute path
}

// A world of ranks runs one graph per rank: parse the spec once per rank.
// Each rank has its own shard (per_rank random data) and writes its own
// file, and the ranks agree on their collectives.
func ExampleWithRank() {
	src := `run: {world: 2}
buffers:
  h_g: {dtype: f32, count: 4, placement: pinned, init: {random: {seed: 7, per_rank: true}}}
  g:   {dtype: f32, count: 4}
ops:
  - copy: {from: h_g, to: g}
  - all_reduce: {view: g, op: avg}
    name: mean
  - copy: {from: g, to: h_g}
outputs:
  - {buffer: h_g, save: "grad_{rank}.bin"}
`
	for r := range 2 {
		s, err := spec.Parse("dp.yaml", []byte(src), spec.WithRank(r, 0))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("rank", s.Rank, "of", s.Run.World, "writes", s.Outputs[0].Save, s.Graph.CollectiveSequence())
	}
	// Output:
	// rank 0 of 2 writes grad_0.bin [all_reduce mean: 4 x f32, avg]
	// rank 1 of 2 writes grad_1.bin [all_reduce mean: 4 x f32, avg]
}

// A GEMM with a residual: y = h W + x, written to y without a copy of x.
func ExampleParse_gemm() {
	src := `buffers:
  h: {dtype: bf16, count: 512, init: {random: 1}}
  w: {dtype: bf16, count: 8192, init: {random: 2}}
  x: {dtype: bf16, count: 256, init: {value: 1}}
  y: {dtype: bf16, count: 256}
ops:
  - gemm: {a: h, b: w, c: x, d: y, m: 4, n: 64, k: 128, beta: 1}
    name: fc2
outputs: [y]
`
	s, err := spec.Parse("mlp.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	op := s.Graph.Ops[0]
	fmt.Println(op.Name, op.Gemm, "lda", op.Gemm.LDA, "reads c:", op.Access[2].Mode)
	// Output:
	// fc2 4x64x128 lda 128 reads c: in
}
