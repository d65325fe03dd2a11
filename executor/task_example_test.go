package executor_test

import (
	"context"
	"fmt"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// A run that starts after the caller's own work and tells the caller when
// it is done, through events the caller owns. The run's stream task counts
// the bytes of its input: on the cpu backend its function gets the host's
// stream and does the work itself; on CUDA it would enqueue on on.Handle
// with the views' addresses on.Addrs.
func ExampleSession_Enqueue() {
	b := dag.New()
	x := b.Buffer("x", 64, dag.OnDevice(0), dag.Value(1))
	n := b.Array("n", dag.I32, 1, dag.OnDevice(0))
	count := func(ctx context.Context, on dag.TaskStream) error {
		if !on.Host {
			return fmt.Errorf("enqueue on stream %#x: not in this example", on.Handle)
		}
		data, err := dag.EncodeValues(dag.I32, []int32{int32(len(on.Mem[0]))})
		copy(on.Mem[1], data)
		return err
	}
	b.Task(count, dag.In(x.All()), dag.Out(n.All()), dag.Name("count"), dag.RunsOnCPU())
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	p, err := planner.New(g)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	be := cpu.New()
	defer be.Close()
	s, err := executor.Open(ctx, be, p)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// The caller's own work records after; dagrun's run waits for it and
	// records done, which the caller waits on.
	after, done := be.NewEvent(), be.NewEvent()
	defer after.Close()
	defer done.Close()
	after.Record()
	if err := s.Enqueue(ctx, executor.External{After: after.Handle(), Done: done.Handle()}); err != nil {
		panic(err)
	}
	if err := done.Wait(ctx); err != nil {
		panic(err)
	}
	if err := s.Sync(ctx); err != nil {
		panic(err)
	}
	out, err := executor.ReadValues[int32](s, n)
	if err != nil {
		panic(err)
	}
	fmt.Println("the task saw", out[0], "bytes")
	// Output: the task saw 64 bytes
}
