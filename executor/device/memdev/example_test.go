package memdev_test

import (
	"context"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	_ "github.com/dagrun/dagrun/executor/device/memdev" // registers "mem"
	"github.com/dagrun/dagrun/planner"
)

// A program opens the backend by its registered name and runs plans on it
// through the executor, as it would any other backend.
func Example() {
	b := dag.New()
	x := b.Buffer("x", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	y := b.Buffer("y", 4*4, dag.OnDevice(0), dag.Of(dag.F32), dag.Value(10))
	b.Launch(dag.Iota, dag.Grid1(1), dag.Grid1(4), x, float32(1))
	b.Launch(dag.Axpy, dag.Grid1(1), dag.Grid1(4), y, x, float32(2))
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	p, err := planner.New(g)
	if err != nil {
		panic(err)
	}
	opened, err := device.Open("mem", device.Config{})
	if err != nil {
		panic(err)
	}
	defer opened.Backend.Close()
	out, err := executor.Execute(context.Background(), opened.Backend, p)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Float32s(x), out.Float32s(y))
	// Output: [1 2 3 4] [12 14 16 18]
}

// What the executor does with a backend, call by call: a session for the
// graph, the plan's streams and events, the plan's steps in submission
// order (an op of one stream waits for an event recorded after an op of
// another), then Sync and Read. A new backend answers exactly these calls.
func Example_session() {
	b := dag.New()
	x := b.Buffer("x", 4*2, dag.OnDevice(0), dag.Of(dag.F32), dag.Zeros())
	fill := b.Fill(x.All(), 3)
	scale := b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(2), x, float32(0.5))
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	opened, err := device.Open("mem", device.Config{})
	if err != nil {
		panic(err)
	}
	defer opened.Backend.Close()
	ctx := context.Background()
	s, err := opened.Backend.Open(ctx, g)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	check := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	check(s.NewStream(0, dag.Normal)) // stream 0
	check(s.NewStream(0, dag.High))   // stream 1
	check(s.NewEvent())               // event 0
	check(s.Run(0, fill))
	check(s.Record(0, 0))
	check(s.Wait(1, 0)) // stream 1 is now ordered after the fill
	check(s.Run(1, scale))
	check(s.Sync(ctx))
	data, err := s.Read(x)
	check(err)
	fmt.Println(data)
	// Output: [0 0 192 63 0 0 192 63]
}
