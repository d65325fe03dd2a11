package trace_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// A copy feeds a kernel on another stream: the trace has a lane per stream,
// a slice per op and a flow for the wait between them.
func ExampleFromRun() {
	b := dag.New()
	in := b.Buffer("in", 4096, dag.PinnedHost(), dag.Zeros())
	x := b.Buffer("x", 4096, dag.Zeros())
	b.Copy(x.All(), in.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(4), dag.Grid1(256), x, 2.0, dag.Name("double"))
	g, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := planner.New(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	// What executor.Session.Spans returns after a run with WithTiming.
	spans := []executor.Span{
		{Op: 0, Stream: int(p.OpStream[0]), Start: 100 * time.Microsecond, End: 110 * time.Microsecond},
		{Op: 1, Stream: int(p.OpStream[1]), Start: 113 * time.Microsecond, End: 120 * time.Microsecond},
	}
	t := trace.FromRun(p, spans)
	for _, l := range t.Lanes {
		fmt.Println(l.Process(), "/", l.Title())
	}
	for _, s := range t.Slices {
		fmt.Printf("%s on %s: %v + %v\n", s.Name, t.Lanes[s.Lane].Name, s.Start, s.Dur)
	}
	for _, f := range t.Flows {
		fmt.Printf("e%d: %s -> %s\n", f.Event, t.Slices[f.From].Name, t.Slices[f.To].Name)
	}
	t.WriteSummary(os.Stdout)
	// Output:
	// GPU 0 / dev0.normal.compute0 (priority normal)
	// GPU 0 / dev0.normal.h2d (priority normal)
	// double on dev0.normal.compute0: 13µs + 7µs
	// upload on dev0.normal.h2d: 0s + 10µs
	// e0: upload -> double
	// makespan 20.0 µs (measured), 2 ops on 2 streams
	//
	// stream                priority  kind     ops     busy  share
	// dev0.normal.compute0  normal    compute    1  7.00 µs  35.0%
	// dev0.normal.h2d       normal    h2d        1  10.0 µs  50.0%
	//
	// copies        count    bytes     time  GB/s
	// pinned->dev0      1  4.0 KiB  10.0 µs   0.4
	//
	// copy/compute overlap  0 ns (0.0% of makespan; 0.0% of copy time 10.0 µs hidden behind kernels, kernel time 7.00 µs)
	// critical path         17.0 µs (makespan / critical path = 1.18)
	// plan estimate         makespan 12.3 µs, critical path 9.08 µs (cost model)
	// plan                  2 ops, 2 streams, 1 cross-stream edge, 1 wait
	//
	// longest waits (1 of 1; idle: the stream's gap before the op, lag: from the end of the op waited for to the op's start)
	// stream                op      waited for                    idle      lag
	// dev0.normal.compute0  double  upload on dev0.normal.h2d  13.0 µs  3.00 µs
}

// A run on the cpu backend, timed and drawn as an SVG timeline: a lane per
// stream, a box per op, an arrow per wait. WriteHTML draws the same with
// zoom and details; WriteChrome writes it for Perfetto.
func ExampleTrace_WriteSVG() {
	b := dag.New()
	in := b.Array("in", dag.F32, 1024, dag.PinnedHost(), dag.Value(1))
	x := b.Array("x", dag.F32, 1024)
	out := b.Array("out", dag.F32, 1024, dag.PinnedHost())
	b.Copy(x.All(), in.All(), dag.Name("upload"))
	b.Launch(dag.Scale, dag.Grid1(4), dag.Threads(256), x, 2.0, dag.Name("double"))
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
	s, err := executor.Open(ctx, cpu.New(), p, executor.WithTiming())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.Run(ctx); err != nil {
		log.Fatal(err)
	}
	var svg strings.Builder
	if err := trace.FromRun(p, s.Spans()).WriteSVG(&svg); err != nil {
		log.Fatal(err)
	}
	for _, class := range []string{"lane", "op", "wait"} {
		fmt.Printf("%s: %d\n", class, strings.Count(svg.String(), `class="`+class+`"`))
	}
	// Output:
	// lane: 3
	// op: 3
	// wait: 2
}
