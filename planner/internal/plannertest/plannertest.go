// Package plannertest holds what the planner's tests and its
// sub-packages' tests share: random planning cases.
package plannertest

import (
	"maps"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/dagtest"
	"github.com/dagrun/dagrun/planner"
)

// RandomCase draws a graph configuration and planner options from seed:
// random sizes and shapes, byte ranges, priorities, temporaries, host
// buffers, devices, After edges, stream budgets 1..32 and both kinds of
// copy streams.
func RandomCase(seed uint64) (dagtest.Config, planner.Options) {
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
		opts.Cost = HugeCost{} // sums that would wrap without saturation
	}
	return cfg, opts
}

// Options are the planner's options that make settings o, for tests that
// draw or tabulate settings as one value (and print it with %+v).
func Options(o planner.Options) []planner.Option {
	opts := []planner.Option{planner.Streams(o.Streams), planner.OrderBy(o.Strategy), planner.ForMode(o.Mode),
		planner.OnTopology(o.Topology), planner.SMs(o.SMs), planner.Cost(o.Cost), planner.Optimize(o.Objective)}
	if o.SharedCopyStreams {
		opts = append(opts, planner.SharedCopyStreams())
	}
	for _, mem := range slices.Sorted(maps.Keys(o.MemoryBudget)) {
		opts = append(opts, planner.MemoryBudget(mem, o.MemoryBudget[mem]))
	}
	if o.PoolTemporaries {
		opts = append(opts, planner.PoolTemporaries())
	}
	if len(o.Rewrites) > 0 {
		opts = append(opts, planner.Rewrite(o.Rewrites...))
	}
	if o.Verify {
		opts = append(opts, planner.Verify())
	}
	return opts
}

// HugeCost gives every op a cost near the int64 limit (1500000h, a few
// nanoseconds apart): any two summed overflow int64.
type HugeCost struct{}

func (HugeCost) Duration(op *dag.Op) time.Duration {
	return 1500000*time.Hour + time.Duration(op.ID%3)
}

// BruteOrdered is a slow second oracle: it reports whether every pair of
// conflicting ops, and every op and its Deps, are ordered by the plan,
// from the transitive closure of the steps' graph (stream order and
// record -> wait edges), checking all pairs of ops.
func BruteOrdered(p *planner.Plan) bool {
	n := len(p.Steps)
	before := make([]big.Int, n) // before[i]: the steps that happen before step i, and i
	last := map[int32]int{}      // stream -> its latest step
	recordAt := map[int32]int{}
	runAt := make([]int, len(p.Graph.Ops))
	for i, st := range p.Steps {
		before[i].SetBit(&before[i], i, 1)
		if j, ok := last[st.Stream]; ok {
			before[i].Or(&before[i], &before[j])
		}
		last[st.Stream] = i
		switch st.Kind {
		case planner.Record:
			recordAt[st.Event] = i
		case planner.Wait:
			before[i].Or(&before[i], &before[recordAt[st.Event]])
		case planner.Run:
			runAt[st.Op] = i
		}
	}
	whole := func(op *dag.Op) []dag.Access {
		if op.Kind == dag.Alloc || op.Kind == dag.Free {
			return []dag.Access{{View: op.Access[0].Buf.All(), Mode: dag.Write}}
		}
		return op.Access
	}
	ops := p.Graph.Ops
	for j, w := range ops {
		for i, u := range ops[:j] {
			conflict := slices.Contains(w.Deps, int32(i))
			for _, a := range whole(u) {
				for _, b := range whole(w) {
					conflict = conflict || a.Overlaps(b.View) && (a.Mode.Writes() || b.Mode.Writes())
				}
			}
			if conflict && before[runAt[j]].Bit(runAt[i]) == 0 {
				return false
			}
		}
	}
	return true
}

// Fixture returns dagtest's fixture graph of that name.
func Fixture(t testing.TB, name string) *dag.Graph {
	t.Helper()
	for _, f := range dagtest.Fixtures() {
		if f.Name == name {
			return f.Graph
		}
	}
	t.Fatalf("no fixture %s", name)
	return nil
}

// Build builds the graph that declare makes, failing t if it is wrong.
func Build(t testing.TB, declare func(b *dag.Builder)) *dag.Graph {
	t.Helper()
	b := dag.New()
	declare(b)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// New plans g, failing t if it cannot.
func New(t testing.TB, g *dag.Graph, opts ...planner.Option) *planner.Plan {
	t.Helper()
	p, err := planner.New(g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
