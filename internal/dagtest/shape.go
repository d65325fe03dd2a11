package dagtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/dagrun/dagrun/dag"
)

// Shape returns a large, cheap graph for benchmarks: ops tiny kernel
// launches (scale, axpy, add over 4 f32 elements) on a pool of 2*width device
// buffers of device 0, each op writing one random buffer and reading up to
// two others. Each buffer's writes form a chain and the reads link the
// chains at random, so the graph has about width-wide parallelism.
func Shape(ops, width int, seed int64) *dag.Graph {
	g, err := ShapeBuilder(ops, width, seed).Build()
	if err != nil {
		panic(fmt.Sprintf("dagtest: Shape(%d, %d, %d) made a graph dag.Build rejects: %v", ops, width, seed, err))
	}
	return g
}

// ShapeBuilder declares the graph Shape returns without building it, for
// benchmarks of dag.Builder.Build itself.
func ShapeBuilder(ops, width int, seed int64) *dag.Builder {
	width = max(width, 1)
	r := rand.New(rand.NewPCG(uint64(seed), 0x7368617065000000))
	b := dag.New()
	pool := make([]*dag.Buffer, 2*width)
	for i := range pool {
		pool[i] = b.Buffer(fmt.Sprintf("p%d", i), 16, dag.Zeros())
	}
	one := dag.Grid1(1)
	other := func(not *dag.Buffer) *dag.Buffer {
		for {
			if x := pool[r.IntN(len(pool))]; x != not {
				return x
			}
		}
	}
	for range max(ops, 0) {
		out := pool[r.IntN(len(pool))]
		switch r.IntN(3) {
		case 0:
			b.Launch(dag.Scale, one, one, out, 1.0)
		case 1:
			b.Launch(dag.Axpy, one, one, out, other(out), 0.5)
		default:
			b.Launch(dag.Add, one, one, out, other(out), other(out))
		}
	}
	return b
}
