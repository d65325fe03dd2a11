package cpu_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// chains declares workload E of BASELINES.md and its kin: n independent
// chains of length kernel launches each, ordered by explicit After edges.
func chains(n, length int, kernel *dag.Kernel, args ...any) *dag.Graph {
	b := dag.New()
	for c := range n {
		var prev *dag.Op
		for i := range length {
			op := b.Launch(kernel, dag.Grid1(1), dag.Grid1(1), args...).With(dag.Name(fmt.Sprintf("c%d.%d", c, i)))
			if prev != nil {
				op.With(dag.After(prev))
			}
			prev = op
		}
	}
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	return g
}

// BenchmarkEager measures the backend's cost per op when launch-bound:
// workload E (8 chains x 100 empty kernels), submitted and synchronised
// once per iteration, planned onto 1 or 8 streams, with tracing (every op
// timed, spans read back) off and on.
func BenchmarkEager(b *testing.B) {
	const perChain, nChains = 100, 8
	g := chains(nChains, perChain, dag.Empty)
	for _, streams := range []int{1, 8} {
		for _, tracing := range []bool{false, true} {
			b.Run(fmt.Sprintf("streams=%d/trace=%v", streams, tracing), func(b *testing.B) {
				benchEager(b, g, streams, tracing)
			})
		}
	}
}

func benchEager(b *testing.B, g *dag.Graph, streams int, tracing bool) {
	const ops = 800
	p, err := planner.New(g, planner.Streams(streams))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var opts []executor.Option
	if tracing {
		opts = append(opts, executor.WithTiming())
	}
	s, err := executor.Open(ctx, cpu.New(), p, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if tracing && len(s.Spans()) != ops {
		b.Fatalf("a traced run timed %d ops, want %d", len(s.Spans()), ops)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ops), "ns/kernel")
}
