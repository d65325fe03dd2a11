package planner_test

import (
	"fmt"
	"os"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// A two-branch pipeline: upload, two independent kernels, a sum of both and
// a download. The branches run on two compute streams; copies run on their
// own streams, and the waits follow the data.
func ExampleNew() {
	b := dag.New()
	in := b.Buffer("in", 1<<20, dag.PinnedHost(), dag.Random(1))
	x := b.Buffer("x", 1<<20, dag.Zeros())
	y := b.Buffer("y", 1<<20, dag.Value(1))
	sum := b.Buffer("sum", 1<<20, dag.Temporary())
	out := b.Buffer("out", 1<<20, dag.PinnedHost(), dag.Zeros())

	b.Copy(x.All(), in.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), x, 2.0, dag.Name("double"))
	b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), 50.0, dag.Name("busy"))
	b.Launch(dag.Scale, dag.Grid1(64), dag.Grid1(256), y, 3.0, dag.Name("triple"))
	b.Launch(dag.Add, dag.Grid1(64), dag.Grid1(256), sum, x, y, dag.Name("add"))
	b.Copy(out.All(), sum.All(), dag.Name("download"))
	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := planner.New(g, planner.Streams(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	p.WriteText(os.Stdout)
	// Output:
	// stream dev0.normal.h2d (device 0, priority normal, h2d)
	//   copy upload (1.0 MiB h2d, in -> x)
	//   record e0
	// stream dev0.normal.compute0 (device 0, priority normal, compute)
	//   launch busy [spin grid 1x1x1 block 32x1x1]
	// stream dev0.normal.compute1 (device 0, priority normal, compute)
	//   launch triple [scale grid 64x1x1 block 256x1x1]
	//   alloc sum (1.0 MiB)
	//   wait e0 (from dev0.normal.h2d after op upload)
	//   launch double [scale grid 64x1x1 block 256x1x1]
	//   launch add [add grid 64x1x1 block 256x1x1] early
	//   record e1
	//   wait e2 (from dev0.normal.d2h after op download)
	//   free sum (1.0 MiB)
	// stream dev0.normal.d2h (device 0, priority normal, d2h)
	//   wait e1 (from dev0.normal.compute1 after op add)
	//   copy download (1.0 MiB d2h, sum -> out)
	//   record e2
	//
	// ops                 8
	// streams             4
	//   dev0 normal   2 compute, 1 h2d, 1 d2h
	// cross-stream edges  3
	// waits inserted      3 (0 cross-stream edges already ordered by earlier waits)
	// estimated makespan  63.8 µs (eager run, list placement)
	// critical path       60.6 µs (makespan / critical path = 1.05)
	// early launches      PDL on 1 edge (launched while the kernel before them runs, on sm_90 and later)
	// memory
	//   pinned host memory   persistent 2.0 MiB
	//   device 0             persistent 2.0 MiB, temporaries peak 1.0 MiB, arena 1.0 MiB (1 temporary, 1.0 MiB in all)
	//     live at the peak: sum (first used by add)
}
