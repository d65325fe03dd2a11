package planner_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/internal/plannertest"
	"github.com/dagrun/dagrun/planner/verify"
)

func TestParseObjective(t *testing.T) {
	for _, o := range planner.Objectives() {
		got, err := planner.ParseObjective(o.String())
		require.NoError(t, err)
		assert.Equal(t, o, got)
	}
	_, err := planner.ParseObjective("speed")
	require.ErrorContains(t, err, "use makespan, memory or streams")
	_, err = planner.New(build(t, fanOut(2)), planner.Optimize(planner.Objective(9)))
	require.ErrorContains(t, err, "unknown objective 9")
}

// Each objective keeps what it promises against the default: FewestStreams
// never more streams than Makespan's plan and within 1% of its makespan;
// LeastMemory never more memory than Makespan's plan. Every plan verifies.
func TestObjectives(t *testing.T) {
	need := func(p *planner.Plan) int64 {
		var n int64
		for _, u := range p.Memory.Memories {
			n += u.Bytes()
		}
		return n
	}
	check := func(t *testing.T, g *dag.Graph, opts planner.Options) {
		fastest := mustPlan(t, g, plannertest.Options(opts)...)
		opts.Objective = planner.FewestStreams
		few := mustPlan(t, g, plannertest.Options(opts)...)
		assert.LessOrEqual(t, few.Stats.Streams, fastest.Stats.Streams)
		assert.LessOrEqual(t, float64(few.Stats.Makespan), 1.01*float64(fastest.Stats.Makespan))
		opts.Objective = planner.LeastMemory
		least := mustPlan(t, g, plannertest.Options(opts)...)
		assert.LessOrEqual(t, need(least), need(fastest))
		for _, p := range []*planner.Plan{fastest, few, least} {
			require.NoError(t, verify.Verify(p))
		}
	}
	for seed := range uint64(60) {
		cfg, opts := plannertest.RandomCase(seed)
		if opts.Cost != nil || opts.PoolTemporaries {
			continue // hugeCost saturates every estimate; a pool's need is its submitted peak
		}
		check(t, dagtest.Random(cfg), opts)
	}
	for _, f := range families {
		q := f.gen(rand.New(rand.NewPCG(1, 0x6f626a)), 8)
		check(t, q.build(t), planner.Options{Streams: 8, Cost: deviceOnly})
	}
}

// FewestStreams trims streams that gain nothing: eight branches of a
// microsecond behind a long one fit on fewer streams in the same time.
func TestFewestStreamsTrims(t *testing.T) {
	g := build(t, func(b *dag.Builder) {
		long := b.Buffer("long", 64)
		b.Launch(dag.Iota, one, one, long, 1.0, dag.Name("long"), dag.Cost(100*time.Microsecond))
		for i := range 8 {
			x := b.Buffer("x"+string(rune('a'+i)), 64)
			b.Launch(dag.Iota, one, one, x, 1.0, dag.Name("short"+string(rune('a'+i))), dag.Cost(time.Microsecond))
		}
	})
	fastest := mustPlan(t, g, planner.Streams(8), planner.Cost(deviceOnly))
	few := mustPlan(t, g, planner.Streams(8), planner.Cost(deviceOnly), planner.Optimize(planner.FewestStreams))
	assert.Equal(t, fastest.Stats.Makespan, few.Stats.Makespan)
	assert.Less(t, few.Stats.Streams, fastest.Stats.Streams)
}

// Bodies of loops are planned under their parent's objective: their own
// pass logs say so.
func TestBodiesUnderTheObjective(t *testing.T) {
	g, _ := loopGraph(t)
	for _, o := range planner.Objectives() {
		p := mustPlan(t, g, planner.Optimize(o))
		require.Len(t, p.Bodies, 1)
		for _, bodies := range p.Bodies {
			for _, body := range bodies {
				i := slices.IndexFunc(body.Passes, func(r planner.PassRecord) bool { return r.Name == "order" })
				require.GreaterOrEqual(t, i, 0)
				assert.Contains(t, body.Passes[i].Summary, "(objective "+o.String()+")")
				assert.Equal(t, "fork-join", body.Passes[len(body.Passes)-1].Name)
			}
		}
	}
}

// serialize is a rewrite pass: every op after the one declared before it.
type serialize struct{ scope planner.Scope }

func (serialize) Name() string           { return "serialize" }
func (s serialize) Scope() planner.Scope { return s.scope }
func (serialize) Run(s *planner.State) (string, error) {
	g := *s.Graph
	g.Ops = slices.Clone(g.Ops)
	for i := 1; i < len(g.Ops); i++ {
		op := *g.Ops[i]
		if !slices.Contains(op.Deps, int32(i-1)) {
			op.Deps = append(slices.Clone(op.Deps), int32(i-1))
			slices.Sort(op.Deps)
		}
		g.Ops[i] = &op
	}
	s.Graph = &g
	return "every op after the one before", nil
}

// failing is a pass that fails.
type failing struct{}

func (failing) Name() string                       { return "failing" }
func (failing) Scope() planner.Scope               { return planner.ScopeRewrite }
func (failing) Run(*planner.State) (string, error) { return "", errors.New("no room") }

// Rewrite passes change the graph before it is placed; only they may, and
// Rewrite takes only them.
func TestRewrites(t *testing.T) {
	g := build(t, fanOut(4))
	p := mustPlan(t, g, planner.Cost(deviceOnly), planner.Rewrite(serialize{planner.ScopeRewrite}), planner.Verify())
	var sum time.Duration
	for _, op := range p.Graph.Ops {
		sum += deviceOnly.Duration(op)
	}
	assert.Equal(t, sum, p.Stats.CriticalPath, "the rewritten graph is one chain")
	assert.Equal(t, sum, p.Stats.Makespan)
	assert.Equal(t, []string{"fuse", "split", "serialize"}, []string{p.Passes[0].Name, p.Passes[1].Name, p.Passes[2].Name}, "fuse and split, then the rewrites")
	assert.Equal(t, "every op after the one before", p.Passes[2].Summary)

	_, err := planner.New(g, planner.Rewrite(serialize{planner.ScopeVerify}))
	var se *planner.ScopeError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "serialize", se.Pass)
	assert.ErrorContains(t, err, "is given to Rewrite, which takes rewrite passes only")

	_, err = planner.New(g, planner.Rewrite(failing{}))
	require.EqualError(t, err, "planner: pass failing: no room")
}
