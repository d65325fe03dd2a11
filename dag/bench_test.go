package dag_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
)

// benchBuild times Build of the graphs declare makes (declared afresh, out
// of the timer, for every iteration: Build names and numbers the ops) and
// reports time and bytes per op and the dependencies per op. It also
// reports the process's CPU time per op (user + system, GC workers
// included), which a machine shared with other work inflates far less than
// the wall-clock time.
func benchBuild(b *testing.B, ops int, declare func() *dag.Builder, wantErr bool) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	var total uint64
	var cpu time.Duration
	edges := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bld := declare()
		runtime.GC()
		runtime.ReadMemStats(&before)
		c0 := cpuTime()
		b.StartTimer()
		g, err := bld.Build()
		b.StopTimer()
		cpu += cpuTime() - c0
		runtime.ReadMemStats(&after)
		total += after.TotalAlloc - before.TotalAlloc
		if (err != nil) != wantErr {
			b.Fatalf("Build: %v", err)
		}
		if g != nil {
			edges = 0
			for _, o := range g.Ops {
				edges += len(o.Deps)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ops), "ns/graphop")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(ops), "cpu-ns/graphop")
	b.ReportMetric(float64(total)/float64(b.N)/float64(ops), "B/graphop")
	if !wantErr {
		b.ReportMetric(float64(edges)/float64(ops), "deps/op")
	}
}

var sizes = []int{10_000, 100_000, 1_000_000}

// BenchmarkBuild builds the graphs planner's BenchmarkNew plans
// (dagtest.Shape: tiny launches on 16 buffers, about 8 wide), so that the
// two compare op for op.
func BenchmarkBuild(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			benchBuild(b, n, func() *dag.Builder { return dagtest.ShapeBuilder(n, 8, 1) }, false)
		})
	}
}

// BenchmarkBuildHostile builds each class of input that was slow or
// unbounded: one-element fills declared in descending offset order (and
// ascending, the floor), a long chain of ops on one buffer, 8 writers
// then n readers of all of a buffer (8n edges, under the cap), and n/2
// disjoint writers then n/2 readers of all of it (n*n/4 edges: refused at
// MaxEdges), n/2 one-element reads then n/2 reads of all of the buffer
// (reads do not cut the writers' ranges: linear), and two host steps that
// write the even and the odd elements of a buffer, then n reads of all of
// it (2 edges each but n ranges to visit: refused at the work cap).
func BenchmarkBuildHostile(b *testing.B) {
	fills := func(n int, desc bool) func() *dag.Builder {
		return func() *dag.Builder {
			bld := dag.New()
			x := bld.Buffer("x", int64(4*n), dag.Zeros())
			for i := range n {
				j := i
				if desc {
					j = n - 1 - i
				}
				bld.Fill(x.Slice(int64(4*j), 4), 1)
			}
			return bld
		}
	}
	chain := func(n int) func() *dag.Builder {
		return func() *dag.Builder {
			bld := dag.New()
			x := bld.Buffer("x", 64, dag.Zeros())
			for range n {
				bld.Launch(dag.Scale, dag.Grid1(1), dag.Threads(32), x, 1.0)
			}
			return bld
		}
	}
	readers := func(n, writers int) func() *dag.Builder {
		return func() *dag.Builder {
			bld := dag.New()
			x := bld.Buffer("x", int64(4*writers), dag.Zeros())
			out := bld.Buffer("out", 4, dag.Zeros())
			for i := range writers {
				bld.Fill(x.Slice(int64(4*i), 4), 1)
			}
			for range n - writers {
				bld.Launch(dag.ReduceSum, dag.Grid1(1), dag.Threads(32), out, dag.In(x.All()))
			}
			return bld
		}
	}
	fragmented := func(n int) func() *dag.Builder {
		return func() *dag.Builder {
			bld := dag.New()
			x := bld.Buffer("x", int64(4*(n/2)), dag.Zeros())
			out := bld.Buffer("out", 4, dag.Zeros())
			for i := range n / 2 {
				bld.Launch(dag.ReduceSum, dag.Grid1(1), dag.Threads(32), out, dag.In(x.Slice(int64(4*i), 4)))
			}
			for range n - n/2 {
				bld.Launch(dag.ReduceSum, dag.Grid1(1), dag.Threads(32), out, dag.In(x.All()))
			}
			return bld
		}
	}
	interleaved := func(n int) func() *dag.Builder {
		return func() *dag.Builder {
			bld := dag.New()
			const elems = 20_000
			x := bld.Buffer("x", 4*elems, dag.PinnedHost(), dag.Zeros())
			var even, odd []dag.OpOption
			for i := range elems {
				if v := x.Slice(int64(4*i), 4); i%2 == 0 {
					even = append(even, dag.Out(v))
				} else {
					odd = append(odd, dag.Out(v))
				}
			}
			bld.Host(noop, even...)
			bld.Host(noop, odd...)
			for range n - 2 {
				bld.Host(noop, dag.In(x.All()))
			}
			return bld
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("ascending/ops=%d", n), func(b *testing.B) { benchBuild(b, n, fills(n, false), false) })
		b.Run(fmt.Sprintf("descending/ops=%d", n), func(b *testing.B) { benchBuild(b, n, fills(n, true), false) })
		b.Run(fmt.Sprintf("chain/ops=%d", n), func(b *testing.B) { benchBuild(b, n, chain(n), false) })
		b.Run(fmt.Sprintf("8xreaders/ops=%d", n), func(b *testing.B) { benchBuild(b, n, readers(n, 8), false) })
		b.Run(fmt.Sprintf("capped/ops=%d", n), func(b *testing.B) { benchBuild(b, n, readers(n, n/2), true) })
		b.Run(fmt.Sprintf("fragmented/ops=%d", n), func(b *testing.B) { benchBuild(b, n, fragmented(n), false) })
		b.Run(fmt.Sprintf("interleaved/ops=%d", n), func(b *testing.B) { benchBuild(b, n, interleaved(n), true) })
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func noop(context.Context, [][]byte) error { return nil }
