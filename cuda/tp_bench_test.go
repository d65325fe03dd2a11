//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// The tensor-parallel MLP block of examples/ranks/tp_mlp.yaml, as a world
// of ranks in one process (rank r on device r): each rank holds a column
// shard of W1 (H x F, F = 4 H / world) and the matching row shard of W2,
//
//	h_r = gelu(x W1_r);  y_r = h_r W2_r;  y = all_reduce(sum of y_r) + x
//
// in bf16, as ../shared/baseline/tp_mlp.py measures it with PyTorch.

// tpPart says which part of the block a graph holds.
type tpPart string

const (
	tpBlock   tpPart = "block"   // the whole block
	tpCompute tpPart = "compute" // the GEMMs and gelu alone: a bound
	tpComm    tpPart = "comm"    // the all-reduce of y alone: a bound
)

// tpShape is how a graph of the block is made: its part, its rows in
// chunks, and the all-reduces at high priority or not.
type tpShape struct {
	part   tpPart
	chunks int
	high   bool
}

// tpGraph is rank r's block of a world of world ranks, its rows split into
// chunks: chunk i's all-reduce and residual depend on chunk i's GEMMs
// only, so the planner may run them beside chunk i+1's GEMMs.
func tpGraph(tb testing.TB, r, world int, t, h int64, sh tpShape) *dag.Graph {
	part, chunks := sh.part, sh.chunks
	tb.Helper()
	f := 4 * h / int64(world)
	g := dag.New()
	bf, dev := dag.Of(dag.BF16), dag.OnDevice(r)
	x := g.Buffer("x", 2*t*h, dev, bf, dag.Random(11))
	w1 := g.Buffer("w1", 2*h*f, dev, bf, dag.Random(uint64(12+100*r)))
	w2 := g.Buffer("w2", 2*f*h, dev, bf, dag.Random(uint64(13+100*r)))
	hid := g.Buffer("h", 2*t*f, dev, bf, dag.Zeros())
	y := g.Buffer("y", 2*t*h, dev, bf, dag.Zeros())
	rows := t / int64(chunks)
	for c := range int64(chunks) {
		xs, hs, ys := x.Slice(2*c*rows*h, 2*rows*h), hid.Slice(2*c*rows*f, 2*rows*f), y.Slice(2*c*rows*h, 2*rows*h)
		if part != tpComm {
			g.Gemm(hs, xs, w1.All(), dag.GemmShape{M: rows, N: f, K: h}, dag.Alpha(0.125), dev)
			g.Launch(dag.Gelu, dag.Grid1(1024), dag.Threads(256), hs, hs, dev)
			g.Gemm(ys, hs, w2.All(), dag.GemmShape{M: rows, N: h, K: f}, dag.Alpha(0.125), dev)
		}
		if part != tpCompute {
			prio := dag.Normal
			if sh.high {
				prio = dag.High
			}
			g.AllReduce(ys, dag.Sum, dev, prio)
		}
		if part == tpBlock {
			g.Launch(dag.Axpy, dag.Grid1(1024), dag.Threads(256), ys, xs, float32(1), dev)
		}
	}
	graph, err := g.Build()
	require.NoError(tb, err)
	return graph
}

// tpWorld opens a world of the block's graphs on b, runs it once eagerly
// (NCCL connects the ranks at their first collective) and captures it.
func tpWorld(tb testing.TB, b *Backend, world int, t, h int64, sh tpShape) (*executor.World, *executor.WorldGraph) {
	tb.Helper()
	plans := make([]*planner.Plan, world)
	for r := range world {
		var err error
		plans[r], err = planner.New(tpGraph(tb, r, world, t, h, sh), planner.ForMode(planner.Replay))
		require.NoError(tb, err)
	}
	ctx := context.Background()
	w, err := executor.OpenWorld(ctx, b, plans, executor.WithRankTimeout(2*time.Minute))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, w.Close()) })
	require.NoError(tb, w.Run(ctx))
	wg, err := w.Capture(ctx)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, wg.Close()) })
	return w, wg
}

// BenchmarkTPMLP times the block at worlds of 2 and of every device (up to
// 8), at T = 8192, H = 4096 and at T = 2048, H = 8192 (where communication
// weighs more), ms per block, each replay waited for as PyTorch's timing
// waits for its events:
//   - compute and comm: the bounds, the GEMMs and gelu alone and the
//     all-reduce alone;
//   - split1: the block as one chunk (serial: the all-reduce after all the
//     GEMMs), replayed and eager;
//   - split2, split4, split8: the rows in 2, 4 and 8 chunks, replayed
//     (and eager, but for 8); split4/high with the all-reduces on a
//     high-priority stream;
//   - split4/maxctas=N: the same with NCCL's communicators bounded to N
//     CTAs (NCCLResources), so that the all-reduce takes fewer SMs from the
//     GEMMs beside it.
//
// DAGRUN_TP_SHAPES ("8192x4096,2048x8192") picks the shapes.
func BenchmarkTPMLP(b *testing.B) {
	be := twoDeviceBackend(b)
	needNCCL(b, be)
	shapes := [][2]int64{{8192, 4096}, {2048, 8192}}
	if s := os.Getenv("DAGRUN_TP_SHAPES"); s != "" {
		shapes = parseTPShapes(b, s)
	}
	for _, world := range worlds(b, be) {
		for _, sh := range shapes {
			t, h := sh[0], sh[1]
			b.Run(fmt.Sprintf("world%d/T=%d/H=%d", world, t, h), func(b *testing.B) {
				replay := func(name string, be *Backend, sh tpShape, eager bool) {
					w, wg := tpWorld(b, be, world, t, h, sh)
					ctx := context.Background()
					b.Run(name, func(b *testing.B) {
						start := time.Now()
						for range b.N {
							if err := wg.Run(ctx); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(time.Since(start).Seconds()*1e3/float64(b.N), "ms/block")
					})
					if !eager {
						return
					}
					b.Run(name+"/eager", func(b *testing.B) {
						start := time.Now()
						for range b.N {
							if err := w.Run(ctx); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(time.Since(start).Seconds()*1e3/float64(b.N), "ms/block")
					})
				}
				replay("compute", be, tpShape{part: tpCompute, chunks: 1}, false)
				replay("comm", be, tpShape{part: tpComm, chunks: 1}, false)
				for _, chunks := range []int{1, 2, 4, 8} {
					replay(fmt.Sprintf("split%d", chunks), be, tpShape{part: tpBlock, chunks: chunks}, chunks != 8)
				}
				replay("split4/high", be, tpShape{part: tpBlock, chunks: 4, high: true}, false)
				for _, ctas := range []int{4, 8, 16} {
					bounded := twoDeviceBackend(b, NCCL(NCCLResources{MaxCTAs: ctas}))
					replay(fmt.Sprintf("split4/maxctas=%d", ctas), bounded, tpShape{part: tpBlock, chunks: 4}, false)
					replay(fmt.Sprintf("split4/high/maxctas=%d", ctas), bounded, tpShape{part: tpBlock, chunks: 4, high: true}, false)
					replay(fmt.Sprintf("comm/maxctas=%d", ctas), bounded, tpShape{part: tpComm, chunks: 1}, false)
				}
			})
		}
	}
}

func parseTPShapes(tb testing.TB, s string) [][2]int64 {
	var out [][2]int64
	for len(s) > 0 {
		var item string
		item, s, _ = strings.Cut(s, ",")
		a, bs, ok := strings.Cut(item, "x")
		require.True(tb, ok, "DAGRUN_TP_SHAPES: %q is not TxH", item)
		t, err := strconv.ParseInt(a, 10, 64)
		require.NoError(tb, err)
		h, err := strconv.ParseInt(bs, 10, 64)
		require.NoError(tb, err)
		out = append(out, [2]int64{t, h})
	}
	return out
}
