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
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

// The tensor-parallel MLP block of examples/ranks/tp_mlp.yaml, as a world
// of ranks in one process (rank r on device r): each rank holds a column
// shard of W1 (H x F, F = 4 H / world) and the matching row shard of W2,
//
//	h_r = gelu(x W1_r);  y_r = h_r W2_r;  y = all_reduce(sum of y_r) + x
//
// in bf16, as ../shared/baseline/tp_mlp.py measures it with PyTorch.

// The parts of the block (dagtest.TPMLP).
const (
	tpBlock   = dagtest.TPBlock
	tpCompute = dagtest.TPCompute // a bound
	tpComm    = dagtest.TPComm    // a bound
)

// tpShape is how a graph of the block is made and planned: its part,
// the blocks of rows the planner cuts it into (dag.SplitInto; 0: as the
// planner chooses), the all-reduces at high priority or not, and the SMs
// the GEMMs beside an all-reduce leave it (planner.CollectiveSMs).
type tpShape struct {
	part   dagtest.TPPart
	chunks int
	high   bool
	leave  int
}

// tpGraph is rank r's block of a world of world ranks (dagtest.TPMLP).
func tpGraph(tb testing.TB, r, world int, t, h int64, sh tpShape) *dag.Graph {
	tb.Helper()
	g, err := dagtest.TPMLP(r, world, t, h, dagtest.TPShape{Part: sh.part, Chunks: sh.chunks, High: sh.high})
	require.NoError(tb, err)
	return g
}

// tpWorld opens a world of the block's graphs on b, runs it once eagerly
// (NCCL connects the ranks at their first collective) and captures it.
func tpWorld(tb testing.TB, b *Backend, world int, t, h int64, sh tpShape) (*executor.World, *executor.WorldGraph) {
	tb.Helper()
	plans := make([]*planner.Plan, world)
	for r := range world {
		var err error
		plans[r], err = planner.New(tpGraph(tb, r, world, t, h, sh), planner.ForMode(planner.Replay), planner.CollectiveSMs(sh.leave))
		require.NoError(tb, err)
		if sh.chunks > 1 && sh.part == tpBlock {
			require.Len(tb, plans[r].Pieces(), 4, "the split pass cut fc1+act, fc2, reduce and residual")
		}
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
//   - split1: the block whole (serial: the all-reduce after all the
//     GEMMs), replayed and eager;
//   - split2, split4, split8: the planner's split pass cuts the block into
//     2, 4 and 8 blocks of rows, each block's all-reduce beside the next
//     block's GEMMs, replayed (and eager for 4); split4/high with the
//     all-reduces on a high-priority stream;
//   - splitN/leave=K: NCCL's communicators bounded to K CTAs
//     (NCCLResources) and the GEMMs beside an all-reduce tuned for the
//     device's SMs less K (planner.CollectiveSMs), so that neither waits
//     on SMs the other holds; comm/maxctas=K is that all-reduce alone;
//   - auto/leave=K: the block with no split asked, as the cost model
//     chooses given K;
//   - comm/copy, splitN/copy: the all-reduce run by copies
//     (CopyCollectives), alone and in the block split in N.
//
// DAGRUN_TP_SHAPES ("8192x4096,2048x8192") picks the shapes.
func BenchmarkTPMLP(b *testing.B) {
	be := twoDeviceBackend(b)
	needNCCL(b, be)
	shapes := [][2]int64{{8192, 4096}, {2048, 8192}}
	if s := os.Getenv("DAGRUN_TP_SHAPES"); s != "" {
		shapes = parseTPShapes(b, s)
	}
	var copied *Backend // nil: the rows by copies are left out, as New says why
	if err := copyConnections(os.Getenv(maxConnectionsVar)); err != nil {
		b.Log(err)
	} else {
		copied = twoDeviceBackend(b, CopyCollectives())
	}
	bounded := map[int]*Backend{}
	for _, ctas := range []int{8, 16, 32} {
		bounded[ctas] = twoDeviceBackend(b, NCCL(NCCLResources{MaxCTAs: ctas}))
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
					replay(fmt.Sprintf("split%d", chunks), be, tpShape{part: tpBlock, chunks: chunks}, chunks == 1 || chunks == 4)
				}
				replay("split4/high", be, tpShape{part: tpBlock, chunks: 4, high: true}, false)
				if copied != nil {
					replay("comm/copy", copied, tpShape{part: tpComm, chunks: 1}, false)
					for _, chunks := range []int{1, 2, 4, 8} {
						replay(fmt.Sprintf("split%d/copy", chunks), copied, tpShape{part: tpBlock, chunks: chunks}, chunks == 4)
					}
				}
				for _, leave := range []int{8, 16, 32} {
					nb := bounded[leave]
					replay(fmt.Sprintf("comm/maxctas=%d", leave), nb, tpShape{part: tpComm, chunks: 1}, false)
					for _, chunks := range []int{2, 4} {
						replay(fmt.Sprintf("split%d/leave=%d", chunks, leave), nb, tpShape{part: tpBlock, chunks: chunks, leave: leave}, leave == 16 && chunks == 4)
					}
					replay(fmt.Sprintf("auto/leave=%d", leave), nb, tpShape{part: tpBlock, leave: leave}, false)
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
