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
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/planner/verify"
)

// The plan-quality benchmark. Random graphs of five
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
			op = b.Copy(b.Buffer(fmt.Sprintf("d%d", i), 64, dag.Zeros()).All(), b.Buffer(fmt.Sprintf("h%d", i), 64, dag.PinnedHost(), dag.Zeros()).All())
		case planner.CopyD2H:
			op = b.Copy(b.Buffer(fmt.Sprintf("h%d", i), 64, dag.PinnedHost(), dag.Zeros()).All(), b.Buffer(fmt.Sprintf("d%d", i), 64, dag.Zeros()).All())
		default:
			op = b.Launch(dag.Scale, one, one, b.Buffer(fmt.Sprintf("d%d", i), 64, dag.Zeros()), 2.0)
		}
		op.With(dag.Name(fmt.Sprintf("op%d", i)), dag.Cost(o.cost))
		for _, d := range o.deps {
			op.With(dag.After(made[d]))
		}
		made[i] = op
	}
	g, err := b.Build()
	require.NoError(t, err)
	return g
}

// bound is a lower bound on the makespan of any plan of q on streams
// compute streams and one copy stream per direction. It splits the graph
// at its cuts, the ops that every other op either precedes or follows
// (the sources and joins of a fork-join's stages): no two parts between
// cuts overlap in time, so the makespan is at least the cuts' costs plus
// each part's own bound. A part's bound is the largest of:
//
//   - its critical path;
//   - for each pool of m streams (compute, or copies of one direction with
//     m = 1), its work spread over the u <= m streams a plan uses, each
//     stream idle before its first op until that op's head (the longest
//     path to it within the part) and busy after its last op for that op's
//     tail (the longest path after it): (u smallest heads + work + u
//     smallest tails) / u, at the u that makes it least;
//   - for each pool of m streams and each k >= 1, the k·m+1 ops of the
//     pool that cost most: some stream runs k+1 of them one after another,
//     so at least the k+1 cheapest of them plus the least head and tail
//     among them.
//
// Each of these holds for every plan; the old bound, max(critical path,
// pool work / streams), is the first two without cuts, heads or tails.
func (q qgraph) bound(streams int) time.Duration {
	n := len(q.ops)
	// after[i][j]: op j depends on op i, directly or not. Generated ops
	// come in a topological order.
	after := make([][]bool, n)
	for i := range after {
		after[i] = make([]bool, n)
	}
	for j := range q.ops {
		for _, d := range q.ops[j].deps {
			after[d][j] = true
			for i := range d {
				if after[i][d] {
					after[i][j] = true
				}
			}
		}
	}
	var total time.Duration
	var part []int
	for i := range q.ops {
		cut := true
		for j := range q.ops {
			if j != i && !after[i][j] && !after[j][i] {
				cut = false
				break
			}
		}
		if !cut {
			part = append(part, i)
			continue
		}
		total += q.partBound(part, streams) + q.ops[i].cost
		part = part[:0]
	}
	return total + q.partBound(part, streams)
}

// partBound is bound's bound of the ops of part, in a topological order,
// alone.
func (q qgraph) partBound(part []int, streams int) time.Duration {
	if len(part) == 0 {
		return 0
	}
	in := map[int]bool{}
	for _, i := range part {
		in[i] = true
	}
	head, tail := map[int]time.Duration{}, map[int]time.Duration{}
	for _, i := range part {
		for _, d := range q.ops[i].deps {
			if in[d] {
				head[i] = max(head[i], head[d]+q.ops[d].cost)
			}
		}
	}
	for _, i := range slices.Backward(part) {
		for _, d := range q.ops[i].deps {
			if in[d] {
				tail[d] = max(tail[d], tail[i]+q.ops[i].cost)
			}
		}
	}
	var b time.Duration
	pools := map[planner.StreamKind][]int{}
	for _, i := range part {
		b = max(b, head[i]+q.ops[i].cost+tail[i])
		pools[q.ops[i].kind] = append(pools[q.ops[i].kind], i)
	}
	for kind, ops := range pools {
		m := 1
		if kind == planner.Compute {
			m = streams
		}
		var work time.Duration
		var heads, tails []time.Duration
		for _, i := range ops {
			work += q.ops[i].cost
			heads, tails = append(heads, head[i]), append(tails, tail[i])
		}
		slices.Sort(heads)
		slices.Sort(tails)
		spread := time.Duration(math.MaxInt64)
		var h, t time.Duration
		for u := 1; u <= min(m, len(ops)); u++ {
			h, t = h+heads[u-1], t+tails[u-1]
			spread = min(spread, (h+work+t+time.Duration(u)-1)/time.Duration(u))
		}
		b = max(b, spread)
		byCost := slices.Clone(ops)
		slices.SortFunc(byCost, func(x, y int) int { return int(q.ops[y].cost - q.ops[x].cost) })
		for k := 1; k*m+1 <= len(byCost); k++ {
			top := byCost[:k*m+1]
			least := time.Duration(math.MaxInt64)
			var leastTail time.Duration = math.MaxInt64
			for _, i := range top {
				least, leastTail = min(least, head[i]), min(leastTail, tail[i])
			}
			sum := least + leastTail
			for _, i := range top[len(top)-k-1:] {
				sum += q.ops[i].cost
			}
			b = max(b, sum)
		}
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
	noOverheads := perf.WithOverheads(nil, perf.Overheads{})
	var fig qualityFigures
	var sumBound, sumRef, sumOld float64
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), uint64(streams)))
		q := f.gen(r, streams)
		g := q.build(t)
		p, err := planner.New(g, planner.Streams(streams), planner.Cost(noOverheads), planner.OrderBy(strategy))
		require.NoError(t, err)
		require.NoError(t, verify.Verify(p))
		old, err := planner.New(g, planner.Streams(streams), planner.Cost(noOverheads), planner.OrderBy(planner.DeclarationOrder))
		require.NoError(t, err)
		got := float64(p.Stats.Makespan)
		bound, ref := float64(q.bound(streams)), float64(q.reference(streams))
		for _, m := range []float64{got, ref, float64(old.Stats.Makespan)} {
			require.GreaterOrEqual(t, m, bound, "seed %d: a plan shorter than the lower bound", seed)
		}
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

// TestPlanQuality holds the strategies to the targets on a fixed
// set of seeds, per family and budget. The default, list scheduling: at
// most 1.01x the reference list scheduler and at most 1.05x the lower bound
// (geo-means), and on no graph more than 1% worse than placement in
// declaration order. Best: the same. Every plan, the reference's and the
// old strategy's included, is at least the bound, which checks the bound.
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
			for _, s := range []struct {
				name string
				fig  qualityFigures
			}{{"list", list}, {"best", best}} {
				assert.LessOrEqual(t, s.fig.geoRef, 1.01, "%s, %d streams, %s: geo-mean over the reference", f.name, streams, s.name)
				assert.LessOrEqual(t, s.fig.geoBound, 1.05, "%s, %d streams, %s: geo-mean over the bound", f.name, streams, s.name)
				assert.LessOrEqual(t, s.fig.worstVsOld, 1.01, "%s, %d streams, %s: worst graph against the old strategy", f.name, streams, s.name)
			}
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
