//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// pdlAxpyChain is n dependent axpy kernels on y (y += alpha x) of bytes
// bytes each, on a grid of one thread per 16 bytes (axpy's vector width)
// in blocks of 256: 16 blocks at 64 KiB, 256 at 1 MiB, 4,096 at 16 MiB.
func pdlAxpyChain(tb testing.TB, n int, bytes int64) (*dag.Graph, *dag.Buffer, *dag.Buffer, int) {
	blocks := int((bytes/16 + 255) / 256)
	g := dag.New()
	y := g.Buffer("y", bytes, dag.Of(dag.F32), dag.Zeros())
	x := g.Buffer("x", bytes, dag.Of(dag.F32), dag.Value(1))
	for range n {
		g.Launch(dag.Axpy, dag.Grid1(blocks), dag.Grid1(256), y, x, float32(0.5))
	}
	graph, err := g.Build()
	require.NoError(tb, err)
	return graph, y, x, blocks
}

// BenchmarkPDL: a chain of 1,000 dependent axpy kernels on one buffer of
// 64 KiB, 1 MiB and 16 MiB, sample by sample in one process: dagrun's
// plan (early launches where the planner chose them: every edge here)
// replayed against a raw graph of the same kernels captured with plain
// launches, and run eagerly against the raw launch loop (one C loop, plain
// launches, then a context sync). replay-plain is the same plan with
// early launches off, to tell what PDL brings from what dagrun adds.
// Targets: replay/raw-graph <= 0.7 at 64 KiB, <= 1.0 at 1 and 16 MiB;
// eager/raw-eager <= 1.0. Hand-written CUDA C on an H200 took 1.054 /
// 1.501 / 11.08 us a kernel replayed without PDL, 0.629 / 1.647 / 20.38
// with it.
func BenchmarkPDL(b *testing.B) {
	const n = 1000
	be := gpuBackend(b)
	_, sms, err := be.DeviceInfo(0)
	require.NoError(b, err)
	ctx := context.Background()
	for _, size := range []struct {
		name  string
		bytes int64
	}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			g, y, x, blocks := pdlAxpyChain(b, n, size.bytes)
			open := func(mode planner.Mode, early planner.EarlyLaunching) (*executor.Session, *planner.Plan) {
				p, err := planner.New(g, planner.Streams(1), planner.SMs(sms), planner.ForMode(mode), planner.Early(early))
				require.NoError(b, err)
				s, err := executor.Open(ctx, be, p)
				require.NoError(b, err)
				b.Cleanup(func() { require.NoError(b, s.Close()) })
				return s, p
			}
			rs, rp := open(planner.Replay, planner.EarlyAuto)
			es, _ := open(planner.Eager, planner.EarlyAuto)
			ps, _ := open(planner.Replay, planner.EarlyNone)
			early, why := rs.EarlyLaunches()
			if why != "" {
				b.Logf("launches go plainly: %s", why)
			}
			replay, err := rs.Capture(ctx)
			require.NoError(b, err)
			plain, err := ps.Capture(ctx)
			require.NoError(b, err)

			// The raw floor works on the replayed session's own buffers.
			se := rs.Device().(*Session)
			count := uint64(size.bytes / 4)
			slots := []uint64{uint64(se.hold.bufs[y.ID].dptr), count, uint64(se.hold.bufs[x.ID].dptr), count, uint64(math.Float32bits(0.5))}
			raw, err := newRawKernel(be, rp.Streams[0].Priority, dag.Axpy, blocks, 256, slots)
			require.NoError(b, err)
			defer raw.close()
			rg, err := newRawGraph(raw, n)
			require.NoError(b, err)
			defer rg.close()

			for range 5 { // warm up: clocks, caches, first launches
				require.NoError(b, rg.launches(1))
				require.NoError(b, replay.Run(ctx))
				require.NoError(b, plain.Run(ctx))
				require.NoError(b, raw.launchesC(n))
				require.NoError(b, es.Run(ctx))
			}
			var trg, tr, tp, tre, te []time.Duration
			b.ResetTimer()
			for range b.N {
				trg = append(trg, timeIt(b, func() error { return rg.launches(1) }))
				tr = append(tr, timeIt(b, func() error { return replay.Run(ctx) }))
				tp = append(tp, timeIt(b, func() error { return plain.Run(ctx) }))
				tre = append(tre, timeIt(b, func() error { return raw.launchesC(n) }))
				te = append(te, timeIt(b, func() error { return es.Run(ctx) }))
			}
			b.StopTimer()
			us := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / n / 1e3 }
			ratio := func(a, b []time.Duration) float64 { return float64(median(a)) / float64(median(b)) }
			b.ReportMetric(float64(rp.EarlyOps()), "early-edges")
			b.ReportMetric(float64(early), "early-launches")
			b.ReportMetric(us(trg), "raw-graph-us/kernel")
			b.ReportMetric(us(tr), "replay-us/kernel")
			b.ReportMetric(ratio(tr, trg), "replay/raw-graph")
			b.ReportMetric(ratio(tp, trg), "replay-plain/raw-graph")
			b.ReportMetric(us(tre), "raw-eager-us/kernel")
			b.ReportMetric(us(te), "eager-us/kernel")
			b.ReportMetric(ratio(te, tre), "eager/raw-eager")
		})
	}
}

// The chain's grids: the planner launches builtins early at every size,
// the 16 MiB chain's 4,096 blocks of 256 (in waves) too.
func TestPDLBenchChainPlans(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		early int
	}{{64 << 10, 999}, {1 << 20, 999}, {16 << 20, 999}} {
		t.Run(fmt.Sprint(tc.bytes), func(t *testing.T) {
			graph, _, _, _ := pdlAxpyChain(t, 1000, tc.bytes)
			p, err := planner.New(graph, planner.Streams(1), planner.SMs(132), planner.ForMode(planner.Replay))
			require.NoError(t, err)
			require.Equal(t, tc.early, p.EarlyOps())
		})
	}
}
