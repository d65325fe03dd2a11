package executor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// Declare a small pipeline, plan it onto streams and run it on the CPU
// backend: y = 1 + 2*x for x = 1..4, then the sum of y.
func Example() {
	b := dag.New()
	x := b.Buffer("x", 4*4)
	y := b.Buffer("y", 4*4, dag.Value(1))
	sum := b.Buffer("sum", 4, dag.Zeros())
	one, four := dag.Grid1(1), dag.Grid1(4)
	b.Launch(dag.Iota, one, four, x, 1.0)
	b.Launch(dag.Axpy, one, four, y, x, 2.0)
	b.Launch(dag.ReduceSum, one, four, sum, y)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g, planner.Options{})
	if err != nil {
		log.Fatal(err)
	}
	out, err := executor.Execute(context.Background(), cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(out[sum])))
	// Output: 24
}

// A session runs a plan again and again; persistent buffers keep their
// contents from one run to the next.
func ExampleSession_Run() {
	b := dag.New()
	x := b.Buffer("x", 4, dag.Value(1))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 3.0)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g, planner.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if err := s.Run(ctx); err != nil {
			log.Fatal(err)
		}
		data, err := s.Read(x)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(data)))
	}
	// Output:
	// 3
	// 9
	// 27
}
