package cpu_test

import (
	"context"
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// BenchmarkGemm times one gemm op run by the cpu backend (a session run of
// a one-op plan) against its floor, gonum's Sgemm called directly on
// slices of the same size, in the same run; bf16 adds the conversions to
// and from f32. The ratio op/gonum is the figure.
func BenchmarkGemm(b *testing.B) {
	for _, n := range []int64{64, 256} {
		flops := 2 * float64(n*n*n)
		b.Run(fmt.Sprintf("%d/gonum-f32", n), func(b *testing.B) {
			a, x, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
			for i := range a {
				a[i], x[i] = float32(i%7), float32(i%5)
			}
			impl := gonum.Implementation{}
			b.ReportAllocs()
			for b.Loop() {
				impl.Sgemm(blas.NoTrans, blas.NoTrans, int(n), int(n), int(n), 1, a, int(n), x, int(n), 0, c, int(n))
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		for _, dt := range []dag.DType{dag.F32, dag.BF16} {
			b.Run(fmt.Sprintf("%d/op-%s", n, dt), func(b *testing.B) {
				bd := dag.New()
				es := dt.Size()
				a := bd.Buffer("a", n*n*es, dag.Of(dt), dag.Random(1))
				x := bd.Buffer("b", n*n*es, dag.Of(dt), dag.Random(2))
				c := bd.Buffer("c", n*n*es, dag.Of(dt), dag.Zeros())
				bd.Gemm(c.All(), a.All(), x.All(), dag.GemmShape{M: n, N: n, K: n})
				g, err := bd.Build()
				if err != nil {
					b.Fatal(err)
				}
				p, err := planner.New(g)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				s, err := executor.Open(ctx, cpu.New(), p)
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
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
