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

// Declare a small pipeline, plan it onto streams and run it on the CPU
// backend: y = 1 + 2*x for x = 1..4, then the sum of y.
func Example() {
	b := dag.New()
	x := b.Array("x", dag.F32, 4)
	y := b.Array("y", dag.F32, 4, dag.Value(1))
	sum := b.Array("sum", dag.F32, 1)
	one, four := dag.Grid1(1), dag.Grid1(4)
	b.Call(dag.Iota, one, four, dag.Args{"x": x, "start": 1})
	b.Call(dag.Axpy, one, four, dag.Args{"y": y, "x": x, "alpha": 2})
	b.Call(dag.ReduceSum, one, four, dag.Args{"out": sum, "in": y})
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	out, err := executor.Execute(context.Background(), cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Float32s(sum))
	// Output: [24]
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
	for range 3 {
		if err := s.Run(ctx); err != nil {
			log.Fatal(err)
		}
		v, err := executor.ReadValues[float32](s, x)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(v[0])
	}
	// Output:
	// 3
	// 9
	// 27
}

// readF32 returns the first f32 of persistent buffer b after the last run.
func readF32(s *executor.Session, b *dag.Buffer) float32 {
	v, err := executor.ReadValues[float32](s, b)
	if err != nil {
		log.Fatal(err)
	}
	return v[0]
}

// A captured graph replays with one launch each; Sync waits for them. One
// backend serves many sessions: close them, then the backend.
func ExampleGraph_Launch() {
	b := dag.New()
	x := b.Buffer("x", 4, dag.Value(1))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	backend := cpu.New()
	defer backend.Close()
	s, err := executor.Open(ctx, backend, p)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	graph, err := s.Capture(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if err := graph.Launch(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := graph.Sync(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(readF32(s, x), graph.Stats().Launches)
	// Output: 8 3
}

// Update changes a captured graph between replays without planning again:
// SetArg sets a kernel's scalar argument, Rebind points the ops of one
// buffer at the memory of another (a second input batch, say).
func ExampleGraph_Update() {
	b := dag.New()
	inA := b.Buffer("in_a", 4, dag.PinnedHost(), dag.Value(1))
	inB := b.Buffer("in_b", 4, dag.PinnedHost(), dag.Value(10))
	x := b.Buffer("x", 4, dag.OnDevice(0), dag.Zeros())
	out := b.Buffer("out", 4, dag.PinnedHost(), dag.Zeros())
	b.Copy(x.All(), inA.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0, dag.Name("scale"))
	b.Copy(out.All(), x.All(), dag.Name("download"))
	g, err := b.Build()
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
	replay := func() float32 {
		if err := graph.Run(ctx); err != nil {
			log.Fatal(err)
		}
		return readF32(s, out)
	}
	fmt.Println(replay())
	if err := graph.Update(ctx, executor.SetArg("scale", "alpha", 3)); err != nil {
		log.Fatal(err)
	}
	fmt.Println(replay())
	if err := graph.Update(ctx, executor.Rebind(inA, inB)); err != nil {
		log.Fatal(err)
	}
	fmt.Println(replay())
	st := graph.Stats()
	fmt.Println(st.Updates, st.UpdatesInPlace)
	// Output:
	// 2
	// 3
	// 30
	// 2 2
}

// Write loads a new input between runs, and Read takes the results out.
func ExampleSession_Write() {
	b := dag.New()
	in := b.Buffer("in", 8, dag.OnDevice(0), dag.Zeros())
	sum := b.Buffer("sum", 4, dag.OnDevice(0), dag.Zeros())
	b.Launch(dag.ReduceSum, dag.Grid1(1), dag.Grid1(32), sum, in)
	g, err := b.Build()
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
	for _, batch := range [][]float32{{1, 2}, {3, 4}} {
		if err := executor.WriteValues(s, in, batch); err != nil {
			log.Fatal(err)
		}
		if err := s.Run(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println(readF32(s, sum))
	}
	// Output:
	// 3
	// 7
}

// Run is the shortest way from a graph to its results: it opens the best
// backend registered (the GPU's when a driver is found, else the CPU's;
// WithBackend chooses), plans, runs once and closes everything. A program
// imports the backends it may use for their registration, as this one
// imports package cpu.
func ExampleRun() {
	b := dag.New()
	x := b.Buffer("x", 4*4, dag.Zeros())
	b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(4), x, 1.0) // x = 1, 2, 3, 4
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(4), x, 2.0)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	out, err := executor.Run(context.Background(), g)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Float32s(x))
	// Output: [2 4 6 8]
}

// A Runner repeats a plan: here it runs eagerly until three runs in a row
// have submitted the same work, captures the plan as a graph then, and
// launches the remaining runs as replays in batches. The report says which
// runs were which; a perf model would learn from WithObserver, and a
// canceled context would stop it with the runs done so far.
func ExampleRunner() {
	b := dag.New()
	x := b.Buffer("x", 4, dag.Value(1))
	b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(1), x, 2.0) // x doubles at every run
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	backend := cpu.New()
	defer backend.Close()
	r, err := executor.NewRunner(ctx, backend, p, executor.WithGraph(executor.GraphAuto))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	report, err := r.Run(ctx, 20)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report.Runs, "runs:", report.Log)
	fmt.Println("replays:", report.Replays.Replays)
	fmt.Println("x =", readF32(r.Session(0), x))
	// Output:
	// 20 runs: runs 1-3 eager, 4-20 replayed (captured automatically after 3 identical eager runs)
	// replays: 17
	// x = 1.048576e+06
}
