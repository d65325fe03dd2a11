package job_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/spec"
)

// A spec run as dagrun run --repeat 5 runs it: planned, run by a runner
// that captures a graph after a few identical runs, its outputs summed.
func Example() {
	s, err := spec.Parse("scale.yaml", []byte(`buffers:
  x: {dtype: f32, count: 1024, init: {value: 1}}
  h: {dtype: f32, count: 1024, placement: pinned}
ops:
  - {launch: scale, args: {x: x, alpha: 2}}
  - copy: {from: x, to: h}
outputs: [h]
`))
	if err != nil {
		panic(err)
	}
	b := cpu.New()
	defer b.Close()
	p, err := job.Plan(s, job.Layout{}.PlanOptions(s)...)
	if err != nil {
		panic(err)
	}
	prog := &job.Program{Spec: s, Plan: p}
	r, err := job.Run(context.Background(), b, prog, job.Config{Backend: "cpu", Repeat: 5, Graph: job.GraphMode(s)})
	if err != nil {
		panic(err)
	}
	r.Wait()
	fmt.Println(r.Runs)
	fmt.Printf("%s: sum %g\n", r.Outputs[0].Buffer, r.Outputs[0].Sum)
	var text strings.Builder
	_ = r.WriteText(&text, nil) // the summary dagrun run prints, with the runs' times
	fmt.Println(strings.Split(text.String(), "\n")[0])
	// Output:
	// runs 1-3 eager, 4-5 replayed (captured automatically after 3 identical eager runs)
	// h: sum 32768
	// output h: bytes=4096 sum=32768 fnv=831c17666504a325
}
