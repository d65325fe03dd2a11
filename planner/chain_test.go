package planner_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// tpBlock declares rank r's tensor-parallel MLP block of a world of 2 in
// f32: h = gelu(x w1_r), y = h w2_r, all_reduce(y), y += x; opts go to the
// all-reduce. Small enough for the cpu backend.
func tpBlock(t *testing.T, r int, rows int64, opts ...dag.OpOption) (*dag.Graph, *dag.Buffer) {
	return tpBlockOf(t, r, rows, 32, 64, dag.F32, opts...)
}

// tpBlockOf is tpBlock with d columns of x and y and f of h, in dt.
func tpBlockOf(t *testing.T, r int, rows, d, f int64, dt dag.DType, opts ...dag.OpOption) (*dag.Graph, *dag.Buffer) {
	t.Helper()
	var y *dag.Buffer
	g := build(t, func(b *dag.Builder) {
		x := b.Array("x", dt, rows*d, dag.OnDevice(0), dag.Random(1))
		w1 := b.Array("w1", dt, d*f, dag.OnDevice(0), dag.Random(uint64(2+10*r)))
		w2 := b.Array("w2", dt, f*d, dag.OnDevice(0), dag.Random(uint64(3+10*r)))
		h := b.Array("h", dt, rows*f, dag.OnDevice(0), dag.Zeros())
		y = b.Array("y", dt, rows*d, dag.OnDevice(0), dag.Zeros())
		b.Gemm(h.All(), x.All(), w1.All(), dag.GemmShape{M: rows, N: f, K: d}, dag.Alpha(1/float64(d)), dag.Name("fc1"))
		b.Launch(dag.Gelu, dag.Grid1(8), dag.Threads(256), h, h, dag.Name("act"))
		b.Gemm(y.All(), h.All(), w2.All(), dag.GemmShape{M: rows, N: d, K: f}, dag.Alpha(1/float64(f)), dag.Name("fc2"))
		b.AllReduce(y.All(), dag.Sum, append(opts, dag.Name("reduce"))...)
		b.Launch(dag.Axpy, dag.Grid1(8), dag.Threads(256), y, x, float32(1), dag.Name("residual"))
	})
	return g, y
}

// An all_reduce that asks for a split is cut into row blocks with the
// GEMMs that compute its rows and the launches around it: each block's
// reduction waits only on its own rows' GEMM (and the block's reduction
// before it, as every rank issues them), the GEMM's later blocks leave
// the collective's SMs, and a world of the split plans computes what a
// world of whole ones does.
func TestChainSplit(t *testing.T) {
	g, _ := tpBlock(t, 0, 64, dag.SplitInto(4))
	p, err := planner.New(g, planner.Verify(), planner.CollectiveSMs(16))
	require.NoError(t, err)
	var names []string
	byName := map[string]*dag.Op{}
	for _, op := range p.Graph.Ops {
		names = append(names, op.Name)
		byName[op.Name] = op
	}
	var want []string
	for _, op := range []string{"fc1+act", "fc2", "reduce", "residual"} {
		for k := 1; k <= 4; k++ {
			want = append(want, fmt.Sprintf("%s#%d/4", op, k))
		}
	}
	assert.Equal(t, want, names)
	depNames := func(name string) []string {
		var out []string
		for _, d := range byName[name].Deps {
			out = append(out, p.Graph.Ops[d].Name)
		}
		return out
	}
	assert.Equal(t, []string{"fc1+act#3/4", "fc2#2/4"}, depNames("fc2#3/4"), "a block's GEMM waits for its own rows, and follows the block before")
	assert.Equal(t, []string{"fc2#3/4", "reduce#2/4"}, depNames("reduce#3/4"), "and its reduction for them and the block before")
	assert.Equal(t, []string{"fc2#2/4", "reduce#1/4"}, depNames("reduce#2/4"))
	assert.Equal(t, []string{"reduce#3/4", "residual#2/4"}, depNames("residual#3/4"))
	assert.Equal(t, 0, byName["fc2#1/4"].Gemm.LeaveSMs, "nothing runs beside the first block")
	assert.Equal(t, 16, byName["fc2#2/4"].Gemm.LeaveSMs)
	assert.Equal(t, 0, byName["fc1+act#2/4"].Gemm.LeaveSMs)
	assert.Len(t, p.Pieces(), 4)
	assert.Contains(t, p.Passes[1].Summary, "fc1+act, fc2, reduce, residual in 4 row blocks")

	ctx := t.Context()
	open := func(opts ...dag.OpOption) (*executor.World, []*dag.Buffer) {
		plans := make([]*planner.Plan, 2)
		ys := make([]*dag.Buffer, 2)
		for r := range 2 {
			var g *dag.Graph
			g, ys[r] = tpBlock(t, r, 64, opts...)
			var err error
			plans[r], err = planner.New(g, planner.Verify(), planner.Streams(3))
			require.NoError(t, err)
		}
		w, err := executor.OpenWorld(ctx, cpu.New(), plans)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, w.Close()) })
		require.NoError(t, w.Run(ctx))
		return w, ys
	}
	whole, wy := open(dag.SplitInto(1))
	split, sy := open(dag.SplitInto(4))
	for r := range 2 {
		a, err := whole.Read(r, wy[r])
		require.NoError(t, err)
		b, err := split.Read(r, sy[r])
		require.NoError(t, err)
		assert.Equal(t, a, b, "rank %d", r)
	}
}

// The pass leaves an all_reduce whole where it cannot cut it or where
// cutting it would not pay, and says why where the graph asked.
func TestChainLeavesWhole(t *testing.T) {
	notAGemm := build(t, func(b *dag.Builder) {
		y := b.Array("y", dag.F32, 4096, dag.OnDevice(0), dag.Random(1))
		w := b.Array("w", dag.F32, 64*64, dag.OnDevice(0), dag.Random(2))
		x := b.Array("x", dag.F32, 4096, dag.OnDevice(0), dag.Random(3))
		b.Gemm(x.All(), y.All(), w.All(), dag.GemmShape{M: 64, N: 64, K: 16}, dag.Name("g"))
		b.Launch(dag.Scale, dag.Grid1(8), dag.Threads(256), y, float32(2), dag.Name("s"))
		b.AllReduce(y.All(), dag.Sum, dag.SplitInto(2), dag.Name("reduce"))
	})
	for _, tc := range []struct {
		name string
		g    *dag.Graph
		opts []planner.Option
		why  string
	}{
		{"rows do not divide", first(tpBlock(t, 0, 64, dag.SplitInto(3))), nil, "reduce not split in 3: 64 rows do not divide into 3 blocks"},
		{"whole asked", first(tpBlock(t, 0, 64, dag.SplitInto(1))), nil, "nothing split"},
		{"not a gemm's output", notAGemm, nil, "reduce not split in 2: reduce's view is not the output of a GEMM"},
		{"split none", first(tpBlock(t, 0, 64, dag.SplitInto(2))), []planner.Option{planner.Split(planner.SplitNone)}, ""},
		{"auto, GEMMs on every SM", first(tpBlock(t, 0, 4096)), nil, "nothing split"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planner.New(tc.g, append(tc.opts, planner.Verify())...)
			require.NoError(t, err)
			assert.Empty(t, p.Pieces())
			if tc.why != "" {
				i := slices.IndexFunc(p.Passes, func(r planner.PassRecord) bool { return r.Name == "split" })
				require.GreaterOrEqual(t, i, 0)
				assert.Contains(t, p.Passes[i].Summary, tc.why)
			}
		})
	}
}

// Given the SMs a collective holds, the cost model cuts a block of
// large bf16 GEMMs by itself, and not one whose reduction is small, nor
// one whose f32 GEMMs would lose more to the SMs left than the reduction
// hides; with no SMs left to collectives, it cuts none.
func TestChainAuto(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rows, d, f int64
		dt         dag.DType
		sms        int
		pieces     int
	}{
		{"large", 8192, 4096, 8192, dag.BF16, 16, 4},
		{"large, GEMMs on every SM", 8192, 4096, 8192, dag.BF16, 0, 0},
		{"large f32", 8192, 4096, 8192, dag.F32, 16, 0},
		{"small", 8192, 32, 64, dag.BF16, 16, 0},
		{"few rows", 256, 4096, 8192, dag.BF16, 16, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := tpBlockOf(t, 0, tc.rows, tc.d, tc.f, tc.dt)
			p, err := planner.New(g, planner.Verify(), planner.CollectiveSMs(tc.sms))
			require.NoError(t, err)
			pieces := 0
			if ps := p.Pieces(); len(ps) > 0 {
				pieces = len(ps[0])
			}
			assert.Equal(t, tc.pieces, pieces, p.Passes[1].Summary)
		})
	}
}

func first[A, B any](a A, _ B) A { return a }
