package planner_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/verify"
)

// Independent ops declared shortest first: placing them in declaration
// order puts the longest last, list scheduling puts it first.
func TestListSchedulingIgnoresDeclarationOrder(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name             string
		costs            []time.Duration
		streams          int
		list, declared   time.Duration
		strategyOfBest   planner.Strategy
		listIsTheOptimum bool
	}{
		{name: "10,10,20 on 2", costs: []time.Duration{10 * us, 10 * us, 20 * us}, streams: 2,
			list: 20 * us, declared: 30 * us, strategyOfBest: planner.ListScheduling},
		{name: "equal costs", costs: []time.Duration{10 * us, 10 * us, 10 * us, 10 * us}, streams: 2,
			list: 20 * us, declared: 20 * us, strategyOfBest: planner.ListScheduling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, func(b *dag.Builder) {
				for i, c := range tc.costs {
					x := b.Buffer(string(rune('a'+i)), 64, dag.Zeros())
					b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(c))
				}
			})
			got := map[planner.Strategy]*planner.Plan{}
			for _, s := range planner.Strategies() {
				got[s] = mustPlan(t, g, planner.Streams(tc.streams), planner.Cost(deviceOnly), planner.OrderBy(s))
				require.NoError(t, verify.Verify(got[s]))
			}
			assert.Equal(t, tc.list, got[planner.ListScheduling].Stats.Makespan)
			assert.Equal(t, tc.declared, got[planner.DeclarationOrder].Stats.Makespan)
			assert.Equal(t, min(tc.list, tc.declared), got[planner.Best].Stats.Makespan)
			assert.Equal(t, tc.strategyOfBest, got[planner.Best].Stats.Strategy)
		})
	}
}

// One compute stream: an upload feeds a long kernel whose download is long
// too, beside an independent kernel declared first. Earliest start first
// runs the independent kernel while the upload is on its way, which delays
// the chain by its whole length; the lookahead (within half the mean op
// cost of the earliest start, the longer path first) waits 20 us for the
// upload and overlaps the download with the independent kernel. The first
// plan is over 1% above the bound (the critical path, 370 us), so list
// scheduling tries the lookahead and keeps its plan.
func TestListSchedulingLooksAhead(t *testing.T) {
	us := time.Microsecond
	g := build(t, func(b *dag.Builder) {
		b.Launch(dag.Scale, one, one, b.Buffer("w", 64, dag.Zeros()), 2.0, dag.Name("beside"), dag.Cost(100*us))
		dev, host, out := b.Buffer("d", 64, dag.Zeros()), b.Buffer("h", 64, dag.PinnedHost(), dag.Zeros()), b.Buffer("o", 64, dag.PinnedHost(), dag.Zeros())
		b.Copy(dev.All(), host.All(), dag.Name("upload"), dag.Cost(20*us))
		b.Launch(dag.Scale, one, one, dev, 2.0, dag.Name("kernel"), dag.Cost(200*us))
		b.Copy(out.All(), dev.All(), dag.Name("download"), dag.Cost(150*us))
	})
	for _, tc := range []struct {
		strategy planner.Strategy
		makespan time.Duration
		first    string // the first op on the compute stream
	}{
		{planner.ListScheduling, 370 * us, "kernel"},
		{planner.Best, 370 * us, "kernel"},
		{planner.DeclarationOrder, 450 * us, "beside"},
	} {
		t.Run(tc.strategy.String(), func(t *testing.T) {
			p := mustPlan(t, g, planner.Streams(1), planner.Cost(deviceOnly), planner.OrderBy(tc.strategy))
			require.NoError(t, verify.Verify(p))
			assert.Equal(t, tc.makespan, p.Stats.Makespan)
			assert.Equal(t, 370*us, p.Stats.CriticalPath)
			for _, st := range p.Steps {
				if st.Kind == planner.Run && p.Streams[st.Stream].Kind == planner.Compute {
					assert.Equal(t, tc.first, g.Ops[st.Op].Name)
					break
				}
			}
		})
	}
}

// List scheduling is never more than 1% longer than declaration order, on
// graphs of every family of the quality benchmark and the property test's
// random graphs, under overheads too; and the same graph and options give
// the same plan.
func TestListSchedulingAgainstDeclarationOrder(t *testing.T) {
	check := func(t *testing.T, g *dag.Graph, opts planner.Options) {
		opts.Strategy = planner.ListScheduling
		list := mustPlan(t, g, plannertest.Options(opts)...)
		again := mustPlan(t, g, plannertest.Options(opts)...)
		assert.Equal(t, list.Steps, again.Steps, "not deterministic")
		opts.Strategy = planner.DeclarationOrder
		declared := mustPlan(t, g, plannertest.Options(opts)...)
		assert.LessOrEqual(t, float64(list.Stats.Makespan), 1.01*float64(declared.Stats.Makespan))
		opts.Strategy = planner.Best
		assert.LessOrEqual(t, mustPlan(t, g, plannertest.Options(opts)...).Stats.Makespan, list.Stats.Makespan)
	}
	for seed := range uint64(200) {
		cfg, opts := plannertest.RandomCase(seed)
		if opts.Cost != nil {
			continue // hugeCost: every estimate saturates
		}
		check(t, dagtest.Random(cfg), opts)
	}
	for _, f := range families {
		for seed := range uint64(20) {
			q := f.gen(rand.New(rand.NewPCG(seed, 0x6c697374)), 4)
			for _, cost := range []perf.CostModel{nil, deviceOnly} {
				check(t, q.build(t), planner.Options{Streams: 4, Cost: cost})
			}
		}
	}
}

// Costs near the int64 limit saturate instead of wrapping: a chain of three
// ops costing 1500000h each stays in order on one stream, under every
// strategy and mode, and Verify accepts the plan.
func TestHugeCostsDoNotWrap(t *testing.T) {
	huge := 1500000 * time.Hour
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 64, dag.Zeros())
		b.Launch(dag.Scale, one, one, x, 2.0, dag.Name("first"))
		b.Launch(dag.Scale, one, one, x, 3.0, dag.Name("second"))
		b.Launch(dag.Scale, one, one, x, 4.0, dag.Name("third"))
		y := b.Buffer("y", 64, dag.Zeros())
		b.Launch(dag.Scale, one, one, y, 2.0, dag.Name("beside"))
	})
	// Build refuses costs beyond dag.MaxCost; the planner must still hold
	// against graphs put together by hand.
	for _, op := range g.Ops {
		op.Cost = huge
	}
	for _, s := range planner.Strategies() {
		for _, mode := range []planner.Mode{planner.Eager, planner.Replay} {
			p := mustPlan(t, g, planner.Streams(2), planner.OrderBy(s), planner.ForMode(mode))
			require.NoError(t, verify.Verify(p), "%s %s", s, mode)
			var chain []string
			for _, st := range p.Steps {
				if name := g.Ops[st.Op].Name; st.Kind == planner.Run && name != "beside" {
					chain = append(chain, name)
				}
			}
			assert.Equal(t, []string{"first", "second", "third"}, chain, "%s %s", s, mode)
			assert.Equal(t, time.Duration(1<<63-1), p.Stats.Makespan, "saturated")
			assert.Equal(t, time.Duration(1<<63-1), p.Stats.CriticalPath, "saturated")
		}
	}
	sched := perf.Simulate(mustPlan(t, g), nil, planner.Eager)
	for i := 1; i < 3; i++ {
		assert.GreaterOrEqual(t, sched.Start[i], sched.Start[i-1])
	}
}

// The plan's estimate is Simulate's makespan of exactly that plan, for the
// mode it was made for; an eager run pays the host's submissions, a replay
// does not.
func TestEstimateIsTheSimulation(t *testing.T) {
	for seed := range uint64(40) {
		cfg, opts := plannertest.RandomCase(seed)
		g := dagtest.Random(cfg)
		for _, mode := range []planner.Mode{planner.Eager, planner.Replay} {
			opts.Mode = mode
			p := mustPlan(t, g, plannertest.Options(opts)...)
			s := perf.Simulate(p, opts.Cost, mode)
			assert.Equal(t, p.Stats.Makespan, s.Makespan, "%+v %+v", cfg, opts)
			assert.Equal(t, mode, p.Stats.Mode)
			for _, op := range g.Ops {
				assert.GreaterOrEqual(t, s.Start[op.ID], time.Duration(0))
				for _, d := range op.Deps {
					assert.GreaterOrEqual(t, s.Start[op.ID], s.Start[d]+s.Duration[d], "%s after %s", op.Name, g.Ops[d].Name)
				}
			}
		}
	}
	// Eager submission of n ops on one stream costs n submissions at least.
	g := build(t, func(b *dag.Builder) {
		x := b.Buffer("x", 64, dag.Zeros())
		for range 10 {
			b.Launch(dag.Scale, one, one, x, 2.0, dag.Cost(time.Nanosecond))
		}
	})
	ov := perf.DefaultOverheads()
	eager := mustPlan(t, g, planner.ForMode(planner.Eager))
	replay := mustPlan(t, g, planner.ForMode(planner.Replay))
	assert.Equal(t, 10*ov.Submit+time.Nanosecond, eager.Stats.Makespan)
	assert.Equal(t, 10*ov.ReplayOp+time.Nanosecond, replay.Stats.Makespan)
	assert.Equal(t, perf.Schedule{Mode: planner.Replay}, perf.Simulate(nil, nil, planner.Replay))
}

func TestStrategyAndModeNames(t *testing.T) {
	for _, s := range planner.Strategies() {
		got, err := planner.ParseStrategy(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	_, err := planner.ParseStrategy("fastest")
	assert.ErrorContains(t, err, "use list, declared or best")
	assert.Equal(t, "eager", planner.Eager.String())
	assert.Equal(t, "replay", planner.Replay.String())
	g := build(t, fanOut(2))
	_, err = planner.New(g, planner.OrderBy(9))
	var de *dag.Error
	require.True(t, errors.As(err, &de))
	assert.Equal(t, "strategy", de.Field)
	_, err = planner.New(g, planner.ForMode(7))
	assert.ErrorContains(t, err, "unknown run mode 7")
}

// spinChains is width independent chains of length spin kernels of us
// microseconds each.
func spinChains(t *testing.T, width, length int, us float64) *dag.Graph {
	t.Helper()
	b := dag.New()
	prev := make([]*dag.Op, width)
	for range length {
		for c := range prev {
			o := b.Launch(dag.Spin, dag.Grid1(1), dag.Grid1(32), us)
			if prev[c] != nil {
				o.With(dag.After(prev[c]))
			}
			prev[c] = o
		}
	}
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

// A replay starts a device's streams one after another (ReplayBranch), so
// a replay's plan spreads short kernels over fewer streams than an eager
// one, and long ones over all of them.
func TestReplayPlansWeighBranches(t *testing.T) {
	for _, tc := range []struct {
		us            float64
		length        int
		replayStreams int // at most
	}{
		{us: 1, length: 1, replayStreams: 4},
		{us: 20, length: 4, replayStreams: 8},
	} {
		g := spinChains(t, 8, tc.length, tc.us)
		eager, err := planner.New(g, planner.Streams(8))
		require.NoError(t, err)
		replay, err := planner.New(g, planner.Streams(8), planner.ForMode(planner.Replay))
		require.NoError(t, err)
		require.NoError(t, verify.Verify(replay))
		assert.Equal(t, 8, eager.Stats.Streams, "us=%g length=%d: eager", tc.us, tc.length)
		assert.LessOrEqual(t, replay.Stats.Streams, tc.replayStreams, "us=%g length=%d: replay", tc.us, tc.length)
		if tc.us >= 20 {
			assert.Equal(t, 8, replay.Stats.Streams, "long kernels keep every stream")
		}
	}
	// The stagger itself: two streams of one device, the second starts
	// its first op a ReplayBranch after the replay's start.
	g := spinChains(t, 2, 1, 10)
	p, err := planner.New(g, planner.Streams(2))
	require.NoError(t, err)
	require.Equal(t, 2, p.Stats.Streams)
	s := perf.Simulate(p, nil, planner.Replay)
	assert.Equal(t, perf.DefaultOverheads().ReplayBranch, max(s.Start[0], s.Start[1]))
}
