package dag_test

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
)

// Declaring work reads like the computation: the dependencies come from the
// buffers each operation reads and writes.
func ExampleBuilder() {
	b := dag.New()
	in := b.Buffer("in", 4096, dag.PinnedHost(), dag.Random(1))
	x := b.Buffer("x", 4096, dag.OnDevice(0), dag.Zeros())
	y := b.Buffer("y", 4096, dag.OnDevice(0), dag.Value(1))
	out := b.Buffer("out", 4096, dag.PinnedHost(), dag.Zeros())

	b.Copy(x.All(), in.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 2.0, dag.Name("double"))
	b.Launch(dag.Axpy, dag.Grid1(4), dag.Threads(256), y, x, 0.5, dag.Name("axpy"))
	b.Copy(out.All(), y.All(), dag.Name("download"))

	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range g.Ops {
		fmt.Printf("%-8s after %v\n", o.Name, depNames(g, o))
	}
	// Output:
	// upload   after []
	// double   after [upload]
	// axpy     after [double]
	// download after [axpy]
}

func depNames(g *dag.Graph, o *dag.Op) []string {
	names := []string{}
	for _, d := range o.Deps {
		names = append(names, g.Ops[d].Name)
	}
	return names
}

// Mistakes are reported all at once, each naming the operation and a fix,
// dependency cycles included, in declaration order.
func ExampleErrors() {
	b := dag.New()
	x := b.Buffer("x", 64, dag.Zeros())
	y := b.Buffer("y", 32, dag.Zeros())
	first := b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 2.0, dag.Name("first"))
	b.Copy(y.All(), x.All(), dag.Name("copy"))
	b.Launch(dag.Empty, dag.Grid1(1), dag.Threads(4096), dag.Name("wide"))
	second := b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(16), x, 0.5, dag.Name("second"))
	first.With(dag.After(second))
	_, err := b.Build()
	for _, e := range dag.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// op "first": dependency cycle: first -> second -> first (remove one of these after edges or reorder the operations)
	// op "copy": copy of 64 bytes from x into 32 bytes of y (copy views of equal size)
	// op "wide": block 4096x1x1 is too large (use at most 1024 threads per block (x, y <= 1024, z <= 64))
}

// A temporary that an explicit Alloc allocates and nothing frees is still
// live when the graph ends: running the graph again would allocate it twice.
func ExampleGraph_LiveAtEnd() {
	b := dag.New()
	scratch := b.Buffer("scratch", 1<<20, dag.Temporary())
	b.Alloc(scratch)
	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.LiveAtEnd())
	// Output:
	// [scratch]
}
