package planner_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/verify"
)

// TestRandomPlansVerify plans thousands of random graphs and proves every
// plan correct with Verify, and checks the figures every plan reports.
func TestRandomPlansVerify(t *testing.T) {
	graphs := 5000
	if testing.Short() {
		graphs = 500
	}
	ops := 0
	for seed := range uint64(graphs) {
		cfg, opts := plannertest.RandomCase(seed)
		cfg.Memset2D = seed%4 == 3 // bounding-range accesses with untouched gaps
		g := dagtest.Random(cfg)
		p, err := planner.New(g, plannertest.Options(opts)...)
		require.NoError(t, err, "%+v %+v", cfg, opts)
		require.NoError(t, verify.Verify(p), "%+v %+v", cfg, opts)

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
				p, err := planner.New(f.Graph, plannertest.Options(opts)...)
				require.NoError(t, err, "%s %+v", f.Name, opts)
				require.NoError(t, verify.Verify(p), "%s %+v", f.Name, opts)
			}
		}
	}
}

// BenchmarkVerifyRandomPlans verifies the plans of the property test's
// first 100 cases; ns/op is per plan.
func BenchmarkVerifyRandomPlans(b *testing.B) {
	var plans []*planner.Plan
	for seed := range uint64(100) {
		cfg, opts := plannertest.RandomCase(seed)
		p, err := planner.New(dagtest.Random(cfg), plannertest.Options(opts)...)
		require.NoError(b, err)
		plans = append(plans, p)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := verify.Verify(plans[i%len(plans)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
