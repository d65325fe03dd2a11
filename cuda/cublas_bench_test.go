//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
)

// BenchmarkGemm times one gemm op run through the backend (Backend.Run on
// one stream, b.N times, then a sync) against the floor: the same
// cublasLtMatmul called b.N times from one C loop, with the same
// descriptors, algorithm, workspace, operands and stream, in the same run.
// The shapes are the MLP block's GEMMs at T = 2048 and small
// ones where launch cost dominates. The ratio op/raw is the figure;
// TFLOP/s is reported beside it.
func BenchmarkGemm(b *testing.B) {
	be := gpuBackend(b, CacheDir(b.TempDir()))
	cases := []struct {
		name  string
		dt    dag.DType
		shape dag.GemmShape
	}{
		{"mlp-up-2048x16384x4096-bf16", dag.BF16, dag.GemmShape{M: 2048, N: 16384, K: 4096}},
		{"mlp-down-2048x4096x16384-bf16", dag.BF16, dag.GemmShape{M: 2048, N: 4096, K: 16384}},
		{"1024x1024x1024-bf16", dag.BF16, dag.GemmShape{M: 1024, N: 1024, K: 1024}},
		{"256x256x256-bf16", dag.BF16, dag.GemmShape{M: 256, N: 256, K: 256}},
		{"64x64x64-f32", dag.F32, dag.GemmShape{M: 64, N: 64, K: 64}},
		{"1024x1024x1024-f32", dag.F32, dag.GemmShape{M: 1024, N: 1024, K: 1024}},
		// 16 to 4096 in each dimension: cubes, and one small dimension
		// beside two large ones.
		{"16x16x16-bf16", dag.BF16, dag.GemmShape{M: 16, N: 16, K: 16}},
		{"128x128x128-bf16", dag.BF16, dag.GemmShape{M: 128, N: 128, K: 128}},
		{"4096x4096x4096-bf16", dag.BF16, dag.GemmShape{M: 4096, N: 4096, K: 4096}},
		{"16x4096x4096-bf16", dag.BF16, dag.GemmShape{M: 16, N: 4096, K: 4096}},
		{"4096x16x4096-bf16", dag.BF16, dag.GemmShape{M: 4096, N: 16, K: 4096}},
		{"4096x4096x16-bf16", dag.BF16, dag.GemmShape{M: 4096, N: 4096, K: 16}},
	}
	for _, c := range cases {
		g := gemmGraph(b, gemmCase{dt: c.dt, shape: c.shape})
		op := g.Ops[len(g.Ops)-1]
		flops := op.Gemm.Flops()
		se, err := be.OpenSession(context.Background(), g)
		if err != nil && strings.Contains(err.Error(), "cuBLASLt") && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
			b.Skipf("no cuBLASLt: %v", err)
		}
		require.NoError(b, err)
		require.NoError(b, se.sub.NewStream(0, dag.Normal))
		s := &se.sub.streams[0]
		r := se.gemms.gemm.recs[op.Gemm]
		ptr := func(i int) dag.View { return op.Access[i].View }
		a, bb, cc := se.hold.ptr(ptr(dag.GemmA)), se.hold.ptr(ptr(dag.GemmB)), se.hold.ptr(ptr(dag.GemmC))
		// Warm up both paths: module loading and clocks.
		require.NoError(b, se.gemms.gemm.raw(r, s.h, a, bb, cc, cc, 3))
		require.NoError(b, se.sub.Run(0, op))
		require.NoError(b, se.host.Sync(context.Background()))
		report := func(b *testing.B) {
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		}
		// Both loops end with a sync inside the timed region, so the
		// figures are device time once the queue is full.
		b.Run(c.name+"/raw", func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			require.NoError(b, se.gemms.gemm.raw(r, s.h, a, bb, cc, cc, b.N))
			require.NoError(b, se.host.Sync(context.Background()))
			b.StopTimer()
			report(b)
		})
		b.Run(c.name+"/op", func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := se.sub.Run(0, op); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, se.host.Sync(context.Background()))
			b.StopTimer()
			report(b)
		})
		require.NoError(b, se.Close(), fmt.Sprintf("closing after %s", c.name))
	}
}
