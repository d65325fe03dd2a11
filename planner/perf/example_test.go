package perf_test

import (
	"fmt"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// Three independent kernels declared shortest first, on two streams: placing
// them in declaration order leaves the longest for last, list scheduling
// starts it first. Simulate gives the same estimate for an eager run (the
// host submits each op in about 3 us) and shows a replay's.
func ExampleSimulate() {
	b := dag.New()
	for i, us := range []int{10, 10, 20} {
		x := b.Buffer(fmt.Sprintf("x%d", i), 64, dag.Zeros())
		b.Launch(dag.Scale, dag.Grid1(1), dag.Grid1(32), x, 2.0, dag.Cost(time.Duration(us)*time.Microsecond))
	}
	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []planner.Strategy{planner.ListScheduling, planner.DeclarationOrder} {
		p, err := planner.New(g, planner.Streams(2), planner.OrderBy(s))
		if err != nil {
			fmt.Println(err)
			return
		}
		replay := perf.Simulate(p, nil, planner.Replay)
		fmt.Printf("%-8s eager %v, replay %v\n", s, p.Stats.Makespan, replay.Makespan)
	}
	// Output:
	// list     eager 26.4µs, replay 21.5µs
	// declared eager 33.2µs, replay 30.175µs
}
