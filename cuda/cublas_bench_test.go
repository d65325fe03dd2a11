//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// BenchmarkGemm times one gemm op run through the backend (submitted n
// times as a session's eager run submits steps, then a sync) against the floor: the same cublasLtMatmul
// called from one C loop, with the same descriptors, algorithm,
// workspace, operands and stream. Each iteration is one sample of each,
// n GEMMs then a sync, alternated so that the device's and the host's
// drift from run to run falls on both alike; the figures are medians per
// GEMM. Small GEMMs are bound by the host's cublasLtMatmul call (about
// 6 us): they reach the raw loop because a run's GEMMs go to the driver
// from the C loop of a stretch, as its launches do, from one OS thread
// (one cgo call per GEMM from a goroutine free to move between threads
// cost 0.5-1.3 us more).
// The shapes are the MLP block's GEMMs at T = 2048 and 16 to 4096 in each
// dimension, where small ones are launch-bound. The ratio op/raw is the
// figure; TFLOP/s is reported beside it.
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
	ctx := context.Background()
	for _, c := range cases {
		g := gemmGraph(b, gemmCase{dt: c.dt, shape: c.shape})
		op := g.Ops[len(g.Ops)-1]
		flops := op.Gemm.Flops()
		se, err := be.OpenSession(ctx, g)
		if err != nil && strings.Contains(err.Error(), ErrNoCuBLASLt.Error()) && os.Getenv("DAGRUN_REQUIRE_GPU") != "1" {
			b.Skipf("no cuBLASLt: %v", err)
		}
		require.NoError(b, err)
		require.NoError(b, se.sub.NewStream(0, dag.Normal))
		s := &se.sub.streams[0]
		r := se.gemms.gemm.recs[op.Gemm]
		ptr := func(i int) dag.View { return op.Access[i].View }
		a, bb, cc := se.hold.ptr(ptr(dag.GemmA)), se.hold.ptr(ptr(dag.GemmB)), se.hold.ptr(ptr(dag.GemmC))
		raw := func(n int) error {
			if err := se.gemms.gemm.raw(r, s.h, a, bb, cc, cc, 0, n); err != nil {
				return err
			}
			return se.host.Sync(ctx)
		}
		// The op n times as a session's run submits it: steps in stretches
		// of 256 from one OS thread.
		steps := make([]device.Step, 256)
		for i := range steps {
			steps[i] = device.Step{Kind: device.RunStep, Stream: 0, Op: op}
		}
		ops := func(n int) error {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for n > 0 {
				k := min(n, len(steps))
				if _, err := se.sub.Submit(steps[:k]); err != nil {
					return err
				}
				n -= k
			}
			return se.host.Sync(ctx)
		}
		// Warm up both paths (module loading, clocks), then size a
		// sample to about 20 ms.
		require.NoError(b, raw(3))
		require.NoError(b, ops(3))
		one := timeIt(b, func() error { return raw(20) }) / 20
		n := max(20, min(20000, int(20*time.Millisecond/max(one, time.Microsecond))))
		b.Run(c.name, func(b *testing.B) {
			var tr, to []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				tr = append(tr, timeIt(b, func() error { return raw(n) }))
				to = append(to, timeIt(b, func() error { return ops(n) }))
			}
			b.StopTimer()
			mr, mo := median(tr)/time.Duration(n), median(to)/time.Duration(n)
			b.ReportMetric(float64(mr.Nanoseconds())/1e3, "raw-us")
			b.ReportMetric(float64(mo.Nanoseconds())/1e3, "op-us")
			b.ReportMetric(float64(mr)/float64(mo), "op-speed/raw")
			b.ReportMetric(flops/mo.Seconds()/1e12, "TFLOP/s")
		})
		require.NoError(b, se.Close(), fmt.Sprintf("closing after %s", c.name))
	}
}
