//go:build unix

package executor_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// BenchmarkShapePlan is the host's part of a new shape's first run, as
// executor.Shapes does it by default, for examples/mlp_stream.yaml at
// T = 512: "at" makes the graph (spec.At), "plan" plans it (planner.New
// with an H200's 132 multiprocessors, as MachineOf gives there), "both"
// does the two in turn, a new value of T every time.
func BenchmarkShapePlan(b *testing.B) {
	s, err := spec.Load("../examples/mlp_stream.yaml")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	opts := executor.Machine{SMs: 132}.Options()
	values := func(i int) map[string]int64 { return map[string]int64{"T": 512 + 16*int64(i%64)} }
	b.Run("at", func(b *testing.B) {
		cpuLoop(b, func(i int) {
			if _, err := s.Shape(ctx, values(i)); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("plan", func(b *testing.B) {
		g, err := s.Shape(ctx, values(0))
		if err != nil {
			b.Fatal(err)
		}
		cpuLoop(b, func(int) {
			if _, err := planner.New(g, opts...); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("both", func(b *testing.B) {
		cpuLoop(b, func(i int) {
			g, err := s.Shape(ctx, values(i))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := planner.New(g, opts...); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// cpuLoop runs f(0), f(1), ... b.N times and reports, beside the wall
// clock, the CPU time of the whole process per op (the garbage
// collector's too): on a shared machine the steadier measure of work.
func cpuLoop(b *testing.B, f func(i int)) {
	b.ReportAllocs()
	start := cpuTime()
	i := 0
	for b.Loop() {
		f(i)
		i++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(i), "cpu-ns/op")
}

// cpuTime is the CPU time this process has used, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
