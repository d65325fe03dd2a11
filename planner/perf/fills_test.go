package perf_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/verify"
)

// chunked is the MLP block of examples/mlp_stream.yaml at its real sizes:
// chunks of x uploaded, h = gelu(x W1), y = h W2 + x, downloaded, with two
// device buffers each for x, h and y.
func chunked(t *testing.T, chunks int) *dag.Graph {
	const T, D, H = 2048, 4096, 16384
	b := dag.New()
	bf := dag.Of(dag.BF16)
	hx := b.Buffer("h_x", int64(chunks)*T*D*2, dag.PinnedHost(), bf, dag.Zeros())
	hy := b.Buffer("h_y", int64(chunks)*T*D*2, dag.PinnedHost(), bf, dag.Zeros())
	w1 := b.Buffer("w1", D*H*2, bf, dag.Zeros())
	w2 := b.Buffer("w2", H*D*2, bf, dag.Zeros())
	var x, h, y [2]*dag.Buffer
	for i := range 2 {
		x[i] = b.Buffer("x"+string(rune('0'+i)), T*D*2, bf, dag.Zeros())
		h[i] = b.Buffer("h"+string(rune('0'+i)), T*H*2, bf, dag.Zeros())
		y[i] = b.Buffer("y"+string(rune('0'+i)), T*D*2, bf, dag.Zeros())
	}
	const chunk = T * D * 2
	for c := range chunks {
		i := c % 2
		b.Copy(x[i].All(), hx.Slice(int64(c*chunk), chunk))
		b.Gemm(h[i].All(), x[i].All(), w1.All(), dag.GemmShape{M: T, N: H, K: D})
		b.Launch(dag.Gelu, dag.Grid1(1056), dag.Grid1(256), h[i], h[i])
		b.Gemm(x[i].All(), h[i].All(), w2.All(), dag.GemmShape{M: T, N: D, K: H}, dag.Output(y[i].All()), dag.Beta(1))
		b.Copy(hy.Slice(int64(c*chunk), chunk), y[i].All())
	}
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

// A pipeline of GEMMs that each fill the device keeps them on one compute
// stream, one at a time and in chunk order: a second stream would only
// share the multiprocessors and finish both chunks late.
func TestFillingOpsShareOneStream(t *testing.T) {
	g := chunked(t, 8)
	p, err := planner.New(g, planner.Streams(4), planner.ForMode(planner.Replay))
	require.NoError(t, err)
	require.NoError(t, verify.Verify(p))
	compute := map[int32]bool{}
	s := perf.Simulate(p, nil, planner.Replay)
	var filling []int
	g = p.Graph // the first GEMM of each chunk takes its gelu as an epilogue
	for i, op := range g.Ops {
		if op.Kind == dag.Gemm || op.Kind == dag.Launch {
			compute[p.OpStream[i]] = true
			filling = append(filling, i)
		}
	}
	declared := slices.Clone(filling)
	slices.SortFunc(filling, func(x, y int) int { return cmp.Compare(s.Start[x], s.Start[y]) })
	assert.Equal(t, declared, filling, "filling ops run in the order declared: the chunks in order")
	for k := 1; k < len(filling); k++ {
		prev, op := filling[k-1], filling[k]
		assert.GreaterOrEqual(t, s.Start[op], s.Start[prev]+s.Duration[prev],
			"%s starts before %s ends: filling ops overlap in the estimate", g.Ops[op].Name, g.Ops[prev].Name)
	}
	assert.Len(t, compute, 1, "every GEMM and gelu on one compute stream")

	// On a device with more multiprocessors than the GEMMs have tiles for,
	// they spread again.
	p, err = planner.New(g, planner.Streams(4), planner.ForMode(planner.Replay), planner.SMs(4096))
	require.NoError(t, err)
	compute = map[int32]bool{}
	for i, op := range p.Graph.Ops {
		if op.Kind == dag.Gemm {
			compute[p.OpStream[i]] = true
		}
	}
	assert.Greater(t, len(compute), 1, "GEMMs that leave room spread over streams")
}

// Independent kernels that fill the device are estimated one after
// another; small ones side by side.
func TestSimulateSerialisesFillingOps(t *testing.T) {
	for _, c := range []struct {
		name  string
		grid  int
		ratio float64 // estimated makespan over one kernel's cost
	}{
		{"filling", 4096, 4},
		{"small", 4, 1},
	} {
		b := dag.New()
		for range 4 {
			b.Launch(dag.Spin, dag.Grid1(c.grid), dag.Grid1(256), 100.0).Cost = 100 * time.Microsecond
		}
		g, err := b.Build()
		require.NoError(t, err)
		p, err := planner.New(g, planner.Streams(4), planner.ForMode(planner.Replay), planner.Cost(perf.WithOverheads(nil, perf.Overheads{})))
		require.NoError(t, err)
		assert.InDelta(t, c.ratio, float64(p.Stats.Makespan)/float64(100*time.Microsecond), 0.01, c.name)
	}
}

func TestOptionsSMs(t *testing.T) {
	g := chunked(t, 1)
	for _, sms := range []int{-1, 1 << 20} {
		_, err := planner.New(g, planner.SMs(sms))
		assert.ErrorContains(t, err, "multiprocessor count", "SMs %d", sms)
	}
}
