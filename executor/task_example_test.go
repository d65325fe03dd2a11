package executor_test

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// A stream task enqueues a library's work on the stream dagrun chose; its
// CPU twin runs on the cpu backend. Here the twin counts the bytes it is
// given; on CUDA the function would call, say, cublasSgemm on on.Handle
// with the views' addresses on.Addrs.
func ExampleSession_Enqueue() {
	b := dag.New()
	x := b.Buffer("x", 64, dag.OnDevice(0), dag.Value(1))
	n := b.Buffer("n", 4, dag.OnDevice(0), dag.Of(dag.I32), dag.Zeros())
	enqueue := func(ctx context.Context, on dag.TaskStream) error {
		return fmt.Errorf("enqueue on stream %#x: not on this backend", on.Handle)
	}
	b.Task("count", enqueue, dag.In(x.All()), dag.Out(n.All())).
		WithCPU(func(_ context.Context, mem [][]byte) error {
			binary.LittleEndian.PutUint32(mem[1], uint32(len(mem[0])))
			return nil
		})
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	p, err := planner.New(g, planner.Options{})
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
	out, _ := s.Read(n)
	fmt.Println("the task saw", binary.LittleEndian.Uint32(out), "bytes")
	// Output: the task saw 64 bytes
}
