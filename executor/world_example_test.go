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

// Run 3 ranks of one program in this process: each rank fills its
// gradient with its own value, and an all-reduce averages them.
func ExampleOpenWorld() {
	const world = 3
	var plans []*planner.Plan
	var grads []*dag.Buffer
	for r := range world {
		b := dag.New()
		g := b.Buffer("grad", 4*4, dag.Of(dag.F32), dag.Zeros())
		b.Fill(g.All(), float64(10*(r+1)))
		b.AllReduce(g.All(), dag.Avg)
		gr, err := b.Build()
		if err != nil {
			log.Fatal(err)
		}
		p, err := planner.New(gr)
		if err != nil {
			log.Fatal(err)
		}
		plans, grads = append(plans, p), append(grads, g)
	}
	w, err := executor.OpenWorld(context.Background(), cpu.New(), plans)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	for r := range world {
		data, err := w.Read(r, grads[r])
		if err != nil {
			log.Fatal(err)
		}
		v, err := dag.DecodeValues[float32](grads[r].DType, data)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("rank %d: %.4g\n", r, v[0])
	}
	// Output:
	// rank 0: 20
	// rank 1: 20
	// rank 2: 20
}
