// Command cublas_task calls a library, cuBLAS, from a stream task: the
// task declares the views it reads and writes, dagrun orders it with the
// rest of the graph and hands it the stream the planner chose, and the
// task enqueues cublasSgemm on that stream. The program writes no stream
// or event code.
//
// The graph: upload A (M x K) and B (K x N), C = A B by cuBLAS (the
// task), R = relu(C) by a builtin kernel, download R. On the cpu backend
// the task's function is called with the host's stream and computes the
// product itself with gonum's BLAS; the inputs
// are small integers, so every sum is exact and both backends print the
// same checksum.
//
//	go run ./examples/go/cublas_task [-backend auto|cpu|cuda] [-replays 3]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// The product's shape.
const m, n, k = 256, 192, 128

func main() {
	backend := flag.String("backend", "auto", "auto (cuda if a driver is present, else cpu), cpu or cuda")
	replays := flag.Int("replays", 3, "graph replays after the eager run")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, *backend, *replays); err != nil {
		fmt.Fprintln(os.Stderr, "cublas_task:", err)
		os.Exit(1)
	}
}

// inputs are A and B: small integers, so products and sums are exact in f32.
func inputs() (a, b []float32) {
	a, b = make([]float32, m*k), make([]float32, k*n)
	for i := range m {
		for j := range k {
			a[i*k+j] = float32((i+2*j)%7 - 3)
		}
	}
	for i := range k {
		for j := range n {
			b[i*n+j] = float32((3*i+j)%5 - 2)
		}
	}
	return a, b
}

// view decodes mem as f32 values.
func view(mem []byte) []float32 {
	v, _ := dag.DecodeValues[float32](dag.F32, mem) // float32 holds f32: no error
	return v
}

// task is the stream task's function: on the host's stream (the cpu
// backend) it computes the product itself, on a GPU's it calls gpu, which
// enqueues cublasSgemm (nil where no GPU library is open).
func task(gpu dag.TaskFunc) dag.TaskFunc {
	return func(ctx context.Context, on dag.TaskStream) error {
		if on.Host {
			return gemmOnHost(on.Mem)
		}
		if gpu == nil {
			return errors.New("the cuBLAS task needs the cuda backend's library")
		}
		return gpu(ctx, on)
	}
}

// gemmOnHost is C = A B with gonum's BLAS, over the bytes of the views
// (A, B, C in access order).
func gemmOnHost(mem [][]byte) error {
	a, b := view(mem[0]), view(mem[1])
	c := make([]float32, m*n)
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: m, Cols: k, Stride: k, Data: a},
		blas32.General{Rows: k, Cols: n, Stride: n, Data: b},
		0, blas32.General{Rows: m, Cols: n, Stride: n, Data: c})
	data, _ := dag.EncodeValues(dag.F32, c) // float32 holds f32: no error
	copy(mem[2], data)
	return nil
}

// declare builds the graph; gpu enqueues the product on a GPU's stream
// (nil on the cpu backend).
func declare(gpu dag.TaskFunc) (*dag.Graph, *dag.Buffer, error) {
	av, bv := inputs()
	g := dag.New()
	ha := g.Array("a_host", dag.F32, m*k, dag.PinnedHost(), dag.Data(av))
	hb := g.Array("b_host", dag.F32, k*n, dag.PinnedHost(), dag.Data(bv))
	a := g.Array("a", dag.F32, m*k, dag.OnDevice(0))
	b := g.Array("b", dag.F32, k*n, dag.OnDevice(0))
	c := g.Array("c", dag.F32, m*n, dag.OnDevice(0))
	r := g.Array("r", dag.F32, m*n, dag.OnDevice(0))
	out := g.Array("out", dag.F32, m*n, dag.PinnedHost())
	g.Copy(a.All(), ha.All(), dag.Name("upload_a"))
	g.Copy(b.All(), hb.All(), dag.Name("upload_b"))
	g.Task(task(gpu), dag.In(a.All()), dag.In(b.All()), dag.Out(c.All()), dag.Name("sgemm"), dag.RunsOnCPU())
	g.Launch(dag.Relu, dag.Grid1(64), dag.Threads(256), r, c, dag.Name("relu"))
	g.Copy(out.All(), r.All(), dag.Name("download"))
	graph, err := g.Build()
	return graph, out, err
}

// checksum weighs each element by its position, so a transposed or
// shifted result does not sum to the same value.
func checksum(data []float32) float64 {
	var s float64
	for i, v := range data {
		s += float64(v) * float64(i%13+1)
	}
	return s
}

func newBackend(name string) (device.Backend, string, error) {
	switch name {
	case "cpu":
		return cpu.New(), "cpu", nil
	case "cuda", "auto":
		b, err := cuda.New()
		if err == nil {
			return b, "cuda", nil
		}
		if name == "auto" && errors.Is(err, cuda.ErrNoDriver) {
			return cpu.New(), "cpu", nil
		}
		return nil, "", err
	}
	return nil, "", fmt.Errorf("unknown backend %q: use auto, cpu or cuda", name)
}

// run runs the graph eagerly once and then replays it, printing each
// checksum; it returns them.
func run(ctx context.Context, w io.Writer, backend string, replays int) (sums []float64, err error) {
	be, name, err := newBackend(backend)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, be.Close()) }()
	var fn dag.TaskFunc
	if name == "cuda" {
		lib, err := openCublas()
		if err != nil {
			return nil, err
		}
		defer lib.Close()
		fn = lib.sgemm(m, n, k)
	}
	g, out, err := declare(fn)
	if err != nil {
		return nil, err
	}
	p, err := planner.New(g)
	if err != nil {
		return nil, err
	}
	s, err := executor.Open(ctx, be, p)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	report := func(what string) error {
		data, err := executor.ReadValues[float32](s, out)
		if err != nil {
			return err
		}
		sum := checksum(data)
		sums = append(sums, sum)
		fmt.Fprintf(w, "%s on %s: C = relu(A B), %dx%dx%d, checksum %.1f\n", what, name, m, n, k, sum)
		return nil
	}
	if err := s.Run(ctx); err != nil {
		return nil, err
	}
	if err := report("eager run"); err != nil {
		return nil, err
	}
	gr, err := s.Capture(ctx)
	if err != nil {
		return nil, err
	}
	for i := range replays {
		if err := s.Write(out, make([]byte, out.Size)); err != nil {
			return nil, err
		}
		if err := gr.Run(ctx); err != nil {
			return nil, err
		}
		if err := report(fmt.Sprintf("replay %d", i+1)); err != nil {
			return nil, err
		}
	}
	return sums, nil
}
