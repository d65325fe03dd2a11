package executor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/comm"
	"github.com/dagrun/dagrun/planner"
)

// BenchmarkWorldAllReduce is one all-reduce per run of a world on the cpu
// backend: raw is the floor, internal/comm's AllReduce called from one
// goroutine per rank on the same sizes; world is World.Run of a plan of
// that one op (sessions, streams, the executor's submission and waits).
func BenchmarkWorldAllReduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int64{4 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("world=%d/bytes=%d/raw", n, size), func(b *testing.B) {
				comms, err := comm.NewLocal(n, comm.Options{})
				require.NoError(b, err)
				bufs := make([][]byte, n)
				for r := range bufs {
					bufs[r] = make([]byte, size)
				}
				b.ReportAllocs()
				b.SetBytes(size)
				for b.Loop() {
					var wg sync.WaitGroup
					for r := range n {
						wg.Go(func() {
							if err := comms[r].AllReduce(context.Background(), bufs[r], dag.F32, dag.Sum); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
				}
			})
			b.Run(fmt.Sprintf("world=%d/bytes=%d/world", n, size), func(b *testing.B) {
				plans := make([]*planner.Plan, n)
				for r := range plans {
					g := dag.New()
					x := g.Buffer("x", size, dag.Of(dag.F32), dag.Zeros())
					g.AllReduce(x.All(), dag.Sum, dag.Name("reduce"))
					gr, err := g.Build()
					require.NoError(b, err)
					plans[r], err = planner.New(gr)
					require.NoError(b, err)
				}
				w, err := executor.OpenWorld(context.Background(), cpu.New(cpu.Workers(1)), plans)
				require.NoError(b, err)
				defer w.Close()
				b.ReportAllocs()
				b.SetBytes(size)
				for b.Loop() {
					if err := w.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
