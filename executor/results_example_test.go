package executor_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// Results read as typed values: Float32s decodes a buffer's f32 elements.
func ExampleResults_Float32s() {
	b := dag.New()
	x := b.Buffer("x", 4*4, dag.Zeros())
	b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(4), x, 1.0)
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(4), x, 0.5)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	results, err := executor.Execute(context.Background(), cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(results.Float32s(x))
	// Output: [0.5 1 1.5 2]
}
