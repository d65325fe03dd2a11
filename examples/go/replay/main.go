// Command replay is a streaming pipeline that is planned and captured once
// and then replayed for every input batch, the way a graph pays off: each
// batch costs one launch, not one submission per op.
//
// Per batch: upload the batch (pinned host memory) to the device, scale it
// by a gain that changes per batch, add an offset, reduce it to its sum,
// and download the result and the sum. Between replays the program writes
// the next batch into the input buffer that the last replay did not use and
// points the graph at it (executor.Rebind: double buffering without a
// copy), and sets the batch's gain (executor.SetArg); both are applied to
// the captured graph in place, without re-planning or re-instantiating.
//
// It runs on the CUDA backend when a driver is present and on the CPU
// backend otherwise; the printed checksums are the same on both.
//
//	go run ./examples/go/replay [-backend auto|cpu|cuda] [-batches 8]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
)

// n is the number of f32 elements of a batch.
const n = 1 << 14

func main() {
	backend := flag.String("backend", "auto", "auto (cuda if a driver is present, else cpu), cpu or cuda")
	batches := flag.Int("batches", 8, "input batches to stream through the graph")
	flag.Parse()
	if _, err := run(context.Background(), os.Stdout, *backend, *batches); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

// batchData is the input of batch i: element j is 0.25 * (i + j mod 10).
func batchData(i int) []float32 {
	x := make([]float32, n)
	for j := range x {
		x[j] = 0.25 * float32(i+j%10)
	}
	return x
}

// gain is the scale factor of batch i.
func gain(i int) float64 { return 1 + 0.5*float64(i) }

// offset is added to every element after scaling.
const offset = 2

// result is what a replay leaves: the device's sum of the output, and the
// output's checksum (its sum in float64, taken on the host).
type result struct {
	Sum      float32
	Checksum float64
}

// stream is the pipeline's graph and the buffers the program touches.
type stream struct {
	g             *dag.Graph
	in            [2]*dag.Buffer // double-buffered input; the ops use in[0], rebound to in[1] for odd batches
	out, sum      *dag.Buffer
	scaleOp       *dag.Op
	gainParameter string
}

func declare() (*stream, error) {
	b := dag.New()
	s := &stream{gainParameter: "alpha"}
	s.in[0] = b.Array("in0", dag.F32, n, dag.PinnedHost(), dag.Uninitialized())
	s.in[1] = b.Array("in1", dag.F32, n, dag.PinnedHost(), dag.Uninitialized())
	x := b.Array("x", dag.F32, n, dag.OnDevice(0))
	ones := b.Array("ones", dag.F32, n, dag.OnDevice(0), dag.Value(1))
	// Persistent, not temporary: a graph with memory nodes (the alloc and
	// free of a temporary) cannot be updated in place, only re-instantiated.
	dsum := b.Array("dsum", dag.F32, 1, dag.OnDevice(0))
	s.out = b.Array("out", dag.F32, n, dag.PinnedHost())
	s.sum = b.Array("sum", dag.F32, 1, dag.PinnedHost())
	grid, block := dag.Grid1(64), dag.Grid1(256)
	b.Copy(x.All(), s.in[0].All(), dag.Name("upload"))
	s.scaleOp = b.Launch(dag.Scale, grid, block, x, float32(gain(0)), dag.Name("gain"))
	b.Call(dag.Axpy, grid, block, dag.Args{"y": x, "x": ones, "alpha": offset}, dag.Name("offset"))
	b.Call(dag.ReduceSum, dag.Grid1(1), dag.Grid1(256), dag.Args{"out": dsum, "in": x}, dag.Name("reduce"))
	b.Copy(s.out.All(), x.All(), dag.Name("download"))
	b.Copy(s.sum.All(), dsum.All(), dag.Name("download_sum"))
	g, err := b.Build()
	s.g = g
	return s, err
}

// newBackend opens the backend asked for; auto falls back to the CPU when
// there is no NVIDIA driver.
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

// run captures the pipeline once and streams batches through it, printing
// one line per batch to w.
func run(ctx context.Context, w io.Writer, backend string, batches int) (results []result, err error) {
	s, err := declare()
	if err != nil {
		return nil, err
	}
	p, err := planner.New(s.g)
	if err != nil {
		return nil, err
	}
	be, name, err := newBackend(backend)
	if err != nil {
		return nil, err
	}
	// The backend outlives the session (closed after it): a program would
	// keep one and open a session per plan on it.
	defer func() { err = errors.Join(err, be.Close()) }()
	sess, err := executor.Open(ctx, be, p)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sess.Close()) }()
	graph, err := sess.Capture(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "backend %s: %d ops on %d streams captured once\n", name, len(s.g.Ops), len(p.Streams))
	for i := range batches {
		in := s.in[i%2]
		if err := executor.WriteValues(sess, in, batchData(i)); err != nil {
			return nil, err
		}
		if err := graph.Update(ctx, executor.Rebind(s.in[0], in), executor.SetArg(s.scaleOp, s.gainParameter, gain(i))); err != nil {
			return nil, err
		}
		if err := graph.Run(ctx); err != nil {
			return nil, err
		}
		r, err := readResult(sess, s)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		fmt.Fprintf(w, "batch %d (from %s, gain %.1f): sum %.1f, checksum %.1f\n", i, in.Name, gain(i), r.Sum, r.Checksum)
	}
	st := graph.Stats()
	fmt.Fprintf(w, "%d replays, %d updates: %d in place, %d re-instantiated\n", st.Launches, st.Updates, st.UpdatesInPlace, st.Reinstantiations)
	return results, nil
}

func readResult(sess *executor.Session, s *stream) (result, error) {
	out, err := executor.ReadValues[float32](sess, s.out)
	if err != nil {
		return result{}, err
	}
	sum, err := executor.ReadValues[float32](sess, s.sum)
	if err != nil {
		return result{}, err
	}
	r := result{Sum: sum[0]}
	for _, v := range out {
		r.Checksum += float64(v)
	}
	return r, nil
}
