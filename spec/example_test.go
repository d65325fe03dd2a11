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
