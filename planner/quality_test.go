package planner_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
)

// The plan-quality benchmark (issue: planner). Random graphs of five
// families, declared in orders that defeat placement in declaration order,
// are planned at several stream budgets with costs given per op and no
// overheads, so that the makespan is the device's alone. Each plan is
// compared with the lower bound max(critical path, max over stream pools of
// the pool's work / its streams) and with a reference list scheduler
// written here, apart from the planner.

// qop is one op of a generated graph: a kernel or a copy in one direction,
// its cost and the ops it follows.
type qop struct {
	kind planner.StreamKind // Compute, CopyH2D or CopyD2H
	cost time.Duration
	deps []int
}

// qgraph is a generated graph and the order its ops are declared in.
type qgraph struct {
	ops   []qop
	order []int // a topological order of ops
}

type family struct {
	name string
	gen  func(r *rand.Rand, streams int) qgraph
}

var families = []family{
	{"layered, depth first", func(r *rand.Rand, s int) qgraph { return layered(r, s, true) }},
	{"layered, breadth first", func(r *rand.Rand, s int) qgraph { return layered(r, s, false) }},
	{"fork-join", forkJoin},
	{"independent, shortest first", independent},
	{"pipeline with copies", pipeline},
}

func usCost(r *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+r.IntN(hi-lo+1)) * time.Microsecond
}

// layered: 3-8 layers of 1-3x the streams wide, each op after 1-3 ops of
// the layer above, costs 20-400 us; declared depth first (each sink's
// ancestors first, deepest path first) or layer by layer.
func layered(r *rand.Rand, streams int, depthFirst bool) qgraph {
	var g qgraph
	var prev []int
	for range 3 + r.IntN(6) {
		width := streams + r.IntN(2*streams+1)
		var layer []int
		for range width {
			op := qop{kind: planner.Compute, cost: usCost(r, 20, 400)}
			if len(prev) > 0 {
				for range 1 + r.IntN(3) {
					d := prev[r.IntN(len(prev))]
					if !slices.Contains(op.deps, d) {
						op.deps = append(op.deps, d)
					}
				}
			}
			layer = append(layer, len(g.ops))
			g.ops = append(g.ops, op)
		}
		prev = layer
	}
	if !depthFirst {
		for i := range g.ops {
			g.order = append(g.order, i)
		}
		return g
	}
	// Depth first: declare each op's dependencies (recursively) just before
	// it, taking the ops of the last layer one by one.
	declared := make([]bool, len(g.ops))
	var visit func(i int)
	visit = func(i int) {
		if declared[i] {
			return
		}
		for _, d := range g.ops[i].deps {
			visit(d)
		}
		declared[i] = true
		g.order = append(g.order, i)
	}
	for i := len(g.ops) - 1; i >= 0; i-- {
		visit(i)
	}
	return g
}

// forkJoin: 1-3 stages of a source, a middle 2-4x the streams wide with
// costs 20-400 us, and a join; declared stage by stage.
func forkJoin(r *rand.Rand, streams int) qgraph {
	var g qgraph
	last := -1
	for range 1 + r.IntN(3) {
		src := qop{kind: planner.Compute, cost: usCost(r, 5, 20)}
		if last >= 0 {
			src.deps = []int{last}
		}
		g.ops = append(g.ops, src)
		s := len(g.ops) - 1
		join := qop{kind: planner.Compute, cost: usCost(r, 5, 20)}
		for range 2*streams + r.IntN(2*streams+1) {
			g.ops = append(g.ops, qop{kind: planner.Compute, cost: usCost(r, 20, 400), deps: []int{s}})
			join.deps = append(join.deps, len(g.ops)-1)
		}
		g.ops = append(g.ops, join)
		last = len(g.ops) - 1
	}
	for i := range g.ops {
		g.order = append(g.order, i)
	}
	return g
}

// independent: 3-20 independent ops of 10-400 us, declared shortest first.
func independent(r *rand.Rand, streams int) qgraph {
	var g qgraph
	for range 3 + r.IntN(18) {
		g.ops = append(g.ops, qop{kind: planner.Compute, cost: usCost(r, 10, 400)})
	}
	slices.SortFunc(g.ops, func(a, b qop) int { return int(a.cost - b.cost) })
	for i := range g.ops {
		g.order = append(g.order, i)
	}
	return g
}

// pipeline: 4-16 chunks, each an upload, 1-3 kernels and a download, with
// 2-3 device buffers reused round robin (a chunk's upload follows the
// download of the chunk that used its buffer before); copies 10-100 us,
// kernels 20-200 us; declared chunk by chunk.
func pipeline(r *rand.Rand, streams int) qgraph {
	var g qgraph
	bufs := 2 + r.IntN(2)
	lastDown := make([]int, bufs)
	for i := range lastDown {
		lastDown[i] = -1
	}
	for c := range 4 + r.IntN(13) {
		up := qop{kind: planner.CopyH2D, cost: usCost(r, 10, 100)}
		if d := lastDown[c%bufs]; d >= 0 {
			up.deps = []int{d}
		}
		g.ops = append(g.ops, up)
		prev := len(g.ops) - 1
		for range 1 + r.IntN(3) {
			g.ops = append(g.ops, qop{kind: planner.Compute, cost: usCost(r, 20, 200), deps: []int{prev}})
			prev = len(g.ops) - 1
		}
		g.ops = append(g.ops, qop{kind: planner.CopyD2H, cost: usCost(r, 10, 100), deps: []int{prev}})
		lastDown[c%bufs] = len(g.ops) - 1
	}
	for i := range g.ops {
		g.order = append(g.order, i)
	}
	return g
}

// build declares q's ops in q.order: each op on buffers of its own (so the
// only dependencies are its deps, given as After), copies between a pinned
// host buffer and a device buffer.
func (q qgraph) build(t testing.TB) *dag.Graph {
	b := dag.New()
	made := make([]*dag.Op, len(q.ops))
	for _, i := range q.order {
		o := q.ops[i]
		var op *dag.Op
		switch o.kind {
		case planner.CopyH2D:
			op = b.Copy(b.Buffer(fmt.Sprintf("d%d", i), 64).All(), b.Buffer(fmt.Sprintf("h%d", i), 64, dag.PinnedHost()).All())
		case planner.CopyD2H:
			op = b.Copy(b.Buffer(fmt.Sprintf("h%d", i), 64, dag.PinnedHost()).All(), b.Buffer(fmt.Sprintf("d%d", i), 64).All())
		default:
			op = b.Launch(dag.Scale, one, one, b.Buffer(fmt.Sprintf("d%d", i), 64), 2.0)
		}
		op.Named(fmt.Sprintf("op%d", i)).Costs(o.cost)
		for _, d := range o.deps {
			op.After(made[d])
		}
		made[i] = op
	}
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

// bound is max(critical path, max over pools of work / streams); copies of
// each direction are a pool with one stream.
func (q qgraph) bound(streams int) time.Duration {
	finish := make([]time.Duration, len(q.ops))
	var cp time.Duration
	work := map[planner.StreamKind]time.Duration{}
	for _, i := range q.order {
		o := q.ops[i]
		var start time.Duration
		for _, d := range o.deps {
			start = max(start, finish[d])
		}
		finish[i] = start + o.cost
		cp = max(cp, finish[i])
		work[o.kind] += o.cost
	}
	b := cp
	for k, w := range work {
		n := 1
		if k == planner.Compute {
			n = streams
		}
		b = max(b, (w+time.Duration(n)-1)/time.Duration(n))
	}
	return b
}

// reference is a textbook list scheduler, apart from the planner: while ops
// remain, take the ready op (every dependency scheduled) that can start
// earliest on a stream of its pool, ties to the longest path to the end,
// then the lowest index, and start it on the stream of its pool that frees
// first. It is O(V^2 · S), which is fine for these sizes.
func (q qgraph) reference(streams int) time.Duration {
	n := len(q.ops)
	bottom := make([]time.Duration, n)
	for i := n - 1; i >= 0; i-- { // ops are generated in a topological order
		bottom[i] += q.ops[i].cost
		for _, d := range q.ops[i].deps {
			bottom[d] = max(bottom[d], bottom[i])
		}
	}
	free := map[planner.StreamKind][]time.Duration{
		planner.Compute: make([]time.Duration, streams),
		planner.CopyH2D: {0}, planner.CopyD2H: {0},
	}
	finish := make([]time.Duration, n)
	done := make([]bool, n)
	var end time.Duration
	for range n {
		best, bestStart, bestStream := -1, time.Duration(0), 0
		for i, o := range q.ops {
			if done[i] || slices.ContainsFunc(o.deps, func(d int) bool { return !done[d] }) {
				continue
			}
			var ready time.Duration
			for _, d := range o.deps {
				ready = max(ready, finish[d])
			}
			s := slices.Index(free[o.kind], slices.Min(free[o.kind]))
			start := max(ready, free[o.kind][s])
			if best < 0 || start < bestStart || start == bestStart && bottom[i] > bottom[best] {
				best, bestStart, bestStream = i, start, s
			}
		}
		o := q.ops[best]
		done[best] = true
		finish[best] = bestStart + o.cost
		free[o.kind][bestStream] = finish[best]
		end = max(end, finish[best])
	}
	return end
}

// qualityFigures are one family's figures at one budget.
type qualityFigures struct {
	geoBound, worstBound float64 // makespan / lower bound
	geoRef, worstRef     float64 // makespan / the reference list scheduler's
	worstVsOld           float64 // makespan / the declaration-order strategy's, the worst graph
	geoOld               float64 // the declaration-order strategy's makespan / lower bound
}

// measureQuality plans graphs seeds of family f at budget streams with
// strategy.
func measureQuality(t testing.TB, f family, streams, seeds int, strategy planner.Strategy) qualityFigures {
	noOverheads := planner.WithOverheads(nil, planner.Overheads{})
	var fig qualityFigures
	var sumBound, sumRef, sumOld float64
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), uint64(streams)))
		q := f.gen(r, streams)
		g := q.build(t)
		p, err := planner.New(g, planner.Options{Streams: streams, Cost: noOverheads, Strategy: strategy})
		require.NoError(t, err)
		require.NoError(t, planner.Verify(p))
		old, err := planner.New(g, planner.Options{Streams: streams, Cost: noOverheads, Strategy: planner.DeclarationOrder})
		require.NoError(t, err)
		got := float64(p.Stats.Makespan)
		bound, ref := float64(q.bound(streams)), float64(q.reference(streams))
		sumBound += math.Log(got / bound)
		sumRef += math.Log(got / ref)
		sumOld += math.Log(float64(old.Stats.Makespan) / bound)
		fig.worstBound = max(fig.worstBound, got/bound)
		fig.worstRef = max(fig.worstRef, got/ref)
		fig.worstVsOld = max(fig.worstVsOld, got/float64(old.Stats.Makespan))
	}
	fig.geoBound = math.Exp(sumBound / float64(seeds))
	fig.geoRef = math.Exp(sumRef / float64(seeds))
	fig.geoOld = math.Exp(sumOld / float64(seeds))
	return fig
}

var qualityBudgets = []int{2, 4, 8}

// TestPlanQuality holds the strategies to what they achieve on a fixed set
// of seeds, per family and budget. List scheduling (the default): at most
// 1.01x the reference list scheduler (geo-mean), and beating placement in
// declaration order against the bound (geo-mean). Best: on no graph more
// than 1% worse than placement in declaration order. Both: at most 1.10x
// the lower bound (geo-mean). The target of 1.05x the bound is not
// met on fork-joins (1.06-1.09x, the reference list scheduler alike: the
// bound ignores that whole ops do not divide evenly over the streams), and
// list scheduling alone loses up to 9% against declaration order on some
// pipelines, as the reference does; BENCHMARKS.md has the figures.
func TestPlanQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a few thousand graphs")
	}
	for _, f := range families {
		for _, streams := range qualityBudgets {
			list := measureQuality(t, f, streams, 60, planner.ListScheduling)
			best := measureQuality(t, f, streams, 60, planner.Best)
			t.Logf("%-28s streams=%d  list: bound geo %.3f worst %.3f, reference geo %.3f worst %.3f, vs old worst %.3f; best: bound geo %.3f, vs old worst %.3f; old: bound geo %.3f",
				f.name, streams, list.geoBound, list.worstBound, list.geoRef, list.worstRef, list.worstVsOld, best.geoBound, best.worstVsOld, list.geoOld)
			assert.LessOrEqual(t, list.geoRef, 1.01, "%s, %d streams: geo-mean over the reference", f.name, streams)
			assert.LessOrEqual(t, list.geoBound, list.geoOld, "%s, %d streams: list scheduling against declaration order", f.name, streams)
			assert.LessOrEqual(t, list.geoBound, 1.10, "%s, %d streams: geo-mean over the bound", f.name, streams)
			assert.LessOrEqual(t, best.geoBound, 1.10, "%s, %d streams: geo-mean over the bound", f.name, streams)
			assert.LessOrEqual(t, best.worstVsOld, 1.01, "%s, %d streams: worst graph against the old strategy", f.name, streams)
		}
	}
}

// BenchmarkPlanQuality reports the plan-quality figures per family and
// budget for each strategy: geo-mean and worst makespan over the lower
// bound and over the reference list scheduler, and the worst graph against
// the declaration-order strategy.
func BenchmarkPlanQuality(b *testing.B) {
	for _, strategy := range []planner.Strategy{planner.ListScheduling, planner.DeclarationOrder, planner.Best} {
		for _, f := range families {
			for _, streams := range qualityBudgets {
				b.Run(fmt.Sprintf("strategy=%s/family=%s/streams=%d", strategy, f.name, streams), func(b *testing.B) {
					var fig qualityFigures
					for b.Loop() {
						fig = measureQuality(b, f, streams, 100, strategy)
					}
					b.ReportMetric(fig.geoBound, "geo/bound")
					b.ReportMetric(fig.worstBound, "worst/bound")
					b.ReportMetric(fig.geoRef, "geo/ref")
					b.ReportMetric(fig.worstRef, "worst/ref")
					b.ReportMetric(fig.worstVsOld, "worst/old")
				})
			}
		}
	}
}
