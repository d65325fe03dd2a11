package planner_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
)

// mlpChunks declares the chunked MLP block of examples/mlp_stream.yaml at
// rows a chunk (f32, narrow, so the cpu backend runs it at once), each
// transfer priced at xfer (0: as the cost model prices it):
// upload x, h = gelu(x w1) in place, y = h w2 + x, download y; two
// device buffers each for x, h and y.
func mlpChunks(t *testing.T, rows, chunks int64, xfer time.Duration) *dag.Graph {
	t.Helper()
	const d, f = 64, 128
	shape := dag.GemmShape{M: rows, N: f, K: d}
	return build(t, func(b *dag.Builder) {
		w1 := b.Array("w1", dag.F32, d*f, dag.OnDevice(0), dag.Random(1))
		w2 := b.Array("w2", dag.F32, f*d, dag.OnDevice(0), dag.Random(2))
		in := b.Array("in", dag.F32, chunks*rows*d, dag.PinnedHost(), dag.Random(3))
		out := b.Array("out", dag.F32, chunks*rows*d, dag.PinnedHost(), dag.Zeros())
		var x, h, y [2]*dag.Buffer
		for i := range 2 {
			x[i] = b.Array(fmt.Sprintf("x%d", i), dag.F32, rows*d, dag.OnDevice(0), dag.Zeros())
			h[i] = b.Array(fmt.Sprintf("h%d", i), dag.F32, rows*f, dag.OnDevice(0), dag.Zeros())
			y[i] = b.Array(fmt.Sprintf("y%d", i), dag.F32, rows*d, dag.OnDevice(0), dag.Zeros())
		}
		chunk := 4 * rows * d
		for c := range chunks {
			x, h, y := x[c%2], h[c%2], y[c%2]
			b.Copy(x.All(), in.Slice(c*chunk, chunk), dag.Name(fmt.Sprintf("up%d", c)), dag.Cost(xfer))
			b.Gemm(h.All(), x.All(), w1.All(), shape, dag.Alpha(1.0/d), dag.Name(fmt.Sprintf("fc1_%d", c)))
			b.Launch(dag.Gelu, dag.Grid1(64), dag.Threads(256), h, h, dag.Name(fmt.Sprintf("gelu%d", c)))
			b.Gemm(x.All(), h.All(), w2.All(), dag.GemmShape{M: shape.M, N: d, K: f}, dag.Alpha(1.0/f), dag.Beta(1),
				dag.Output(y.All()), dag.Name(fmt.Sprintf("fc2_%d", c)))
			b.Copy(out.Slice(c*chunk, chunk), y.All(), dag.Name(fmt.Sprintf("down%d", c)), dag.Cost(xfer))
		}
	})
}

// The split pass cuts the first GEMM and its upload, and the last GEMM
// and its download, into row blocks, each piece waiting only on the piece
// it reads; the ops between stay whole, and the cpu backend computes the
// same bytes as from the graph as declared.
func TestSplitPass(t *testing.T) {
	g := mlpChunks(t, 1024, 3, time.Millisecond)
	p, err := planner.New(g, planner.Verify())
	require.NoError(t, err)
	var names []string
	for _, op := range p.Graph.Ops {
		names = append(names, op.Name)
	}
	assert.Equal(t, []string{"up0#1/4", "up0#2/4", "up0#3/4", "up0#4/4",
		"fc1_0+gelu0#1/4", "fc1_0+gelu0#2/4", "fc1_0+gelu0#3/4", "fc1_0+gelu0#4/4", "fc2_0", "down0",
		"up1", "fc1_1+gelu1", "fc2_1", "down1",
		"up2", "fc1_2+gelu2", "fc2_2#1/4", "fc2_2#2/4", "fc2_2#3/4", "fc2_2#4/4",
		"down2#1/4", "down2#2/4", "down2#3/4", "down2#4/4"}, names)
	byName := map[string]*dag.Op{}
	for _, op := range p.Graph.Ops {
		byName[op.Name] = op
	}
	depNames := func(name string) []string {
		var out []string
		for _, d := range byName[name].Deps {
			out = append(out, p.Graph.Ops[d].Name)
		}
		return out
	}
	assert.Equal(t, []string{"up0#2/4", "fc1_0+gelu0#1/4"}, depNames("fc1_0+gelu0#2/4"), "a piece waits for the rows it reads, and follows the piece before")
	assert.Equal(t, []string{"fc2_2#3/4", "down2#2/4"}, depNames("down2#3/4"))
	assert.Subset(t, depNames("fc2_0"), []string{"fc1_0+gelu0#1/4", "fc1_0+gelu0#4/4"}, "the whole after every piece")
	assert.Equal(t, int64(256), byName["fc2_2#4/4"].Gemm.M)
	assert.Len(t, p.Declared.Ops, 15)
	assert.Contains(t, p.Passes[1].Summary, "up0 and fc1_0+gelu0 in 4 row blocks; fc2_2 and down2 in 4 row blocks")

	whole, err := planner.New(g, planner.Split(planner.SplitNone))
	require.NoError(t, err)
	require.Len(t, whole.Graph.Ops, 12)
	ctx := context.Background()
	want, err := executor.Execute(ctx, cpu.New(), whole)
	require.NoError(t, err)
	got, err := executor.Execute(ctx, cpu.New(), p)
	require.NoError(t, err)
	for buf, data := range want {
		assert.Equal(t, data, got[buf], buf.Name)
	}
}

// The pass leaves a pipeline whole where cutting it would not pay or
// would change what it computes, and says why.
func TestSplitLeavesWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		g     *dag.Graph
		opts  []planner.Option
		why   string
		parts int // ops of the plan
	}{
		{"few rows", mlpChunks(t, 256, 2, time.Millisecond), nil, "fc1_0+gelu0 has 256 rows, too few to cut into blocks of 256", 8},
		{"split none", mlpChunks(t, 1024, 2, time.Millisecond), []planner.Option{planner.Split(planner.SplitNone)}, "", 8},
		{"cheap transfers", mlpChunks(t, 1024, 2, 0), nil, "up0 would hide", 8},
		{"no gemm", build(t, func(b *dag.Builder) {
			x := b.Array("x", dag.F32, 1024, dag.OnDevice(0), dag.Zeros())
			b.Launch(dag.Relu, dag.Grid1(4), dag.Threads(256), x, x)
		}), nil, "nothing split", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planner.New(tc.g, append(tc.opts, planner.Verify())...)
			require.NoError(t, err)
			assert.Len(t, p.Graph.Ops, tc.parts)
			if tc.why != "" {
				i := slices.IndexFunc(p.Passes, func(r planner.PassRecord) bool { return r.Name == "split" })
				require.GreaterOrEqual(t, i, 0)
				assert.Contains(t, p.Passes[i].Summary, tc.why)
			}
		})
	}
}

// The verifier refuses pieces that leave rows of their whole unread.
func TestVerifyPieces(t *testing.T) {
	g := mlpChunks(t, 1024, 2, time.Millisecond)
	t.Run("rows left out", func(t *testing.T) {
		p, err := planner.New(g)
		require.NoError(t, err)
		for _, op := range p.Graph.Ops {
			if op.Name == "up0#2/4" {
				op.Access[0].Size /= 2
				op.Access[1].Size /= 2
			}
		}
		err = verify.Verify(p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "up0")
	})
	t.Run("whole", func(t *testing.T) {
		p, err := planner.New(g)
		require.NoError(t, err)
		require.NoError(t, verify.Verify(p))
	})
}
