// Command pipeline builds a small GPU pipeline in Go with package dag,
// plans it onto streams and runs it: upload a vector, scale it, add a bias,
// reduce it to its sum on the device, and download the result and the sum.
// The upload of the second half overlaps the compute on the first.
//
// It runs on the CPU backend, which needs no GPU. On a machine with an
// NVIDIA driver, use cuda.New() from package cuda instead of cpu.New() (and
// close it when done: a CUDA backend holds the device context): the
// plan and the results are the same.
//
//	go run ./examples/go/pipeline
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/spec"
)

const (
	n    = 4096 // elements
	half = n / 2 * 4
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

// pipeline declares the work. Dependencies come from the views each op
// reads and writes: the two halves of x are independent until the sum.
func pipeline() (*dag.Graph, *dag.Buffer, *dag.Buffer, error) {
	b := dag.New()
	in := b.Array("in", dag.F32, n, dag.PinnedHost(), dag.Random(1))
	x := b.Array("x", dag.F32, n, dag.OnDevice(0))
	bias := b.Array("bias", dag.F32, n, dag.OnDevice(0), dag.Value(0.25))
	sum := b.Array("sum", dag.F32, 1, dag.OnDevice(0), dag.Temporary())
	out := b.Array("out", dag.F32, n, dag.PinnedHost())
	total := b.Array("total", dag.F32, 1, dag.PinnedHost())

	for i, lo := range []int64{0, half} {
		xs := x.Slice(lo, half)
		b.Copy(xs, in.Slice(lo, half), dag.Name(fmt.Sprintf("upload%d", i)))
		b.Launch(dag.Scale, dag.Grid1(8), dag.Grid1(256), xs, 3.0, dag.Name(fmt.Sprintf("scale%d", i)))
		b.Call(dag.Axpy, dag.Grid1(8), dag.Grid1(256), dag.Args{"y": xs, "x": bias.Slice(lo, half), "alpha": 1}, dag.Name(fmt.Sprintf("bias%d", i)))
	}
	b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Grid1(256), sum, x, dag.Name("reduce"), dag.High)
	b.Copy(total.All(), sum.All(), dag.Name("download_sum"), dag.High)
	b.Copy(out.All(), x.All(), dag.Name("download"))
	g, err := b.Build()
	return g, out, total, err
}

func run(ctx context.Context, w io.Writer) error {
	g, out, total, err := pipeline()
	if err != nil {
		return err
	}
	p, err := planner.New(g, planner.Streams(2))
	if err != nil {
		return err
	}
	if err := verify.Verify(p); err != nil {
		return err
	}
	fmt.Fprintf(w, "plan: %d ops on %d streams, %d waits for %d cross-stream edges\n",
		p.Stats.Ops, p.Stats.Streams, p.Stats.Waits, p.Stats.CrossEdges)

	mem, err := executor.Execute(ctx, cpu.New(), p)
	if err != nil {
		return err
	}
	for _, b := range []*dag.Buffer{out, total} {
		fmt.Fprintf(w, "%s: %s\n", b.Name, spec.Checksum(mem[b], b.DType))
	}
	return nil
}
