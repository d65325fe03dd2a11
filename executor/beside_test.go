package executor_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// doubleBuffered is a graph that sums input in0 (rebound to in1 for odd
// batches) after a spin that keeps each replay running a while.
func doubleBuffered() (g *dag.Graph, in [2]*dag.Buffer, sum *dag.Buffer, err error) {
	b := dag.New()
	in[0] = b.Array("in0", dag.F32, 4, dag.PinnedHost(), dag.Uninitialized())
	in[1] = b.Array("in1", dag.F32, 4, dag.PinnedHost(), dag.Uninitialized())
	x := b.Array("x", dag.F32, 4)
	dsum := b.Array("dsum", dag.F32, 1)
	sum = b.Array("sum", dag.F32, 1, dag.PinnedHost())
	b.Launch(dag.Spin, dag.Grid1(1), dag.Threads(1), 20000.0) // 20 ms
	b.Copy(x.All(), in[0].All())
	b.Call(dag.ReduceSum, dag.Grid1(1), dag.Threads(4), dag.Args{"out": dsum, "in": x})
	b.Copy(sum.All(), dsum.All())
	g, err = b.Build()
	return g, in, sum, err
}

// Double buffering: while a replay reads one input buffer, the host
// writes the next batch into the other, which the replay does not use.
func ExampleSession_Write_doubleBuffered() {
	g, in, sum, err := doubleBuffered()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	graph, err := s.Capture(ctx)
	if err != nil {
		log.Fatal(err)
	}
	batch := func(i int) []float32 { f := float32(i); return []float32{f, f, f, f} }
	if err := executor.WriteValues(s, in[0], batch(0)); err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		if err := graph.Update(ctx, executor.Rebind(in[0], in[i%2])); err != nil {
			log.Fatal(err)
		}
		if err := graph.Launch(ctx); err != nil {
			log.Fatal(err)
		}
		// The replay runs; the next batch goes into the other buffer now.
		if err := executor.WriteValues(s, in[(i+1)%2], batch(i+1)); err != nil {
			log.Fatal(err)
		}
		if err := graph.Sync(ctx); err != nil {
			log.Fatal(err)
		}
		v, err := executor.ReadValues[float32](s, sum)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(v[0])
	}
	// Output:
	// 0
	// 4
	// 8
	// 12
}

// TestWriteBesideReplay: while a replay is in flight, Write takes a host
// buffer the replay does not use and refuses one it uses.
func TestWriteBesideReplay(t *testing.T) {
	g, in, _, err := doubleBuffered()
	require.NoError(t, err)
	p, err := planner.New(g)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	require.NoError(t, err)
	defer s.Close()
	graph, err := s.Capture(ctx)
	require.NoError(t, err)
	require.NoError(t, graph.Launch(ctx))
	require.NoError(t, executor.WriteValues(s, in[1], []float32{1, 2, 3, 4}), "in1 is not used by the replay")
	require.ErrorContains(t, executor.WriteValues(s, in[0], []float32{1, 2, 3, 4}), `buffer "in0" is used by the work still running`)
	require.NoError(t, graph.Sync(ctx))
	require.NoError(t, graph.Update(ctx, executor.Rebind(in[0], in[1])))
	require.NoError(t, graph.Launch(ctx))
	require.NoError(t, executor.WriteValues(s, in[0], []float32{1, 2, 3, 4}), "rebound: in0 is free now")
	require.ErrorContains(t, executor.WriteValues(s, in[1], []float32{1, 2, 3, 4}), `buffer "in1" is used`)
	require.NoError(t, graph.Sync(ctx))
	require.NoError(t, executor.WriteValues(s, in[1], []float32{1, 2, 3, 4}), "after Sync anything goes")
}
