package planner_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

// randomCase draws a graph configuration and planner options from seed:
// random sizes and shapes, byte ranges, priorities, temporaries, host
// buffers, devices, After edges, stream budgets 1..32 and both kinds of
// copy streams.
func randomCase(seed uint64) (dagtest.Config, planner.Options) {
	r := rand.New(rand.NewPCG(seed, 0x70726f70))
	cfg := dagtest.Config{
		Ops:         10 + r.IntN(240),
		Buffers:     1 + r.IntN(12),
		Seed:        int64(seed),
		Ranges:      r.IntN(3) != 0,
		Priorities:  r.IntN(2) == 0,
		Temporaries: r.IntN(2) == 0,
		HostBuffers: r.IntN(2) == 0,
		Devices:     1 + r.IntN(3),
		After:       r.IntN(3) == 0,
	}
	opts := planner.Options{Streams: 1 + r.IntN(32), SharedCopyStreams: r.IntN(4) == 0}
	if r.IntN(8) == 0 {
		opts.Streams = 0 // the default budget
	}
	opts.Strategy = planner.Strategies()[r.IntN(3)]
	opts.Mode = planner.Mode(r.IntN(2))
	opts.PoolTemporaries = r.IntN(3) == 0
	if r.IntN(10) == 0 {
		opts.Cost = hugeCost{} // sums that would wrap without saturation
	}
	return cfg, opts
}

// hugeCost gives every op a cost near the int64 limit (1500000h, a few
// nanoseconds apart): any two summed overflow int64.
type hugeCost struct{}

func (hugeCost) Duration(op *dag.Op) time.Duration {
	return 1500000*time.Hour + time.Duration(op.ID%3)
}

// TestRandomPlansVerify plans thousands of random graphs and proves every
// plan correct with Verify, and checks the figures every plan reports.
func TestRandomPlansVerify(t *testing.T) {
	graphs := 5000
	if testing.Short() {
		graphs = 500
	}
	ops := 0
	for seed := range uint64(graphs) {
		cfg, opts := randomCase(seed)
		cfg.Memset2D = seed%4 == 3 // bounding-range accesses with untouched gaps
		g := dagtest.Random(cfg)
		p, err := planner.New(g, opts)
		require.NoError(t, err, "%+v %+v", cfg, opts)
		require.NoError(t, planner.Verify(p), "%+v %+v", cfg, opts)

		s := p.Stats
		require.Equal(t, len(g.Ops), s.Ops, "%+v", cfg)
		require.Equal(t, len(p.Streams), s.Streams, "%+v", cfg)
		require.LessOrEqual(t, s.Waits, s.CrossEdges, "%+v %+v: a wait per cross-stream edge at most", cfg, opts)
		require.GreaterOrEqual(t, s.Makespan, s.CriticalPath, "%+v %+v: no plan beats the critical path", cfg, opts)
		waits := 0
		for _, st := range p.Steps {
			if st.Kind == planner.Wait {
				waits++
			}
		}
		require.Equal(t, waits, s.Waits, "%+v %+v: Stats.Waits counts the wait steps", cfg, opts)
		ops += len(g.Ops)
	}
	t.Logf("verified %d plans of %d ops in all", graphs, ops)
}

// TestFixturePlansVerify plans dagtest's hand-made shapes under every
// stream budget and both kinds of copy streams.
func TestFixturePlansVerify(t *testing.T) {
	for _, f := range dagtest.Fixtures() {
		for streams := 1; streams <= 32; streams++ {
			for _, shared := range []bool{false, true} {
				opts := planner.Options{Streams: streams, SharedCopyStreams: shared}
				p, err := planner.New(f.Graph, opts)
				require.NoError(t, err, "%s %+v", f.Name, opts)
				require.NoError(t, planner.Verify(p), "%s %+v", f.Name, opts)
			}
		}
	}
}

// BenchmarkVerifyRandomPlans verifies the plans of the property test's
// first 100 cases; ns/op is per plan.
func BenchmarkVerifyRandomPlans(b *testing.B) {
	var plans []*planner.Plan
	for seed := range uint64(100) {
		cfg, opts := randomCase(seed)
		p, err := planner.New(dagtest.Random(cfg), opts)
		require.NoError(b, err)
		plans = append(plans, p)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := planner.Verify(plans[i%len(plans)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
