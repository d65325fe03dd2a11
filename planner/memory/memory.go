package memory

import (
	"cmp"
	"math"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// Of returns the memory p needs: each memory's persistent bytes, the
// temporaries' peak and their arena. New sets Plan.Memory to it.
//
// The packing is greedy, as TFLite's arena planner and XLA's heap
// simulator do it: temporaries are placed one at a time, each at the
// lowest-waste gap (best fit) or the lowest gap (first fit) among the
// temporaries already placed that the plan does not order against it, in
// four orders (largest first, most bytes live beside it first, longest
// lived first, first used first); then, while the arena is above the peak,
// a local search moves the temporaries that end above the peak earlier in
// the order of the best packing so far. The smallest arena wins. The
// temporaries that may be live together are found in one replay of the
// plan's steps, which retires a temporary once every stream that will use
// temporaries again has waited for its last use; the peak is a maximum flow
// over that order, found beside the first packing, which needs no peak.
// The work is about linear in the temporaries and the pairs of them that
// the plan leaves unordered, and the local search is bounded
// (maxPackWork).
func Of(p *plan.Plan) *plan.Memory {
	if p == nil || p.Graph == nil {
		return nil
	}
	g := p.Graph
	mem := &plan.Memory{}
	uses := map[int]*plan.MemoryUse{}
	use := func(dev int) *plan.MemoryUse {
		u := uses[dev]
		if u == nil {
			u = &plan.MemoryUse{Device: dev}
			uses[dev] = u
		}
		return u
	}
	temps := 0
	for _, b := range g.Buffers {
		if b == nil {
			continue
		}
		if b.Temporary {
			temps++
		} else {
			u := use(plan.BufferMemory(b))
			u.Persistent = dag.AddSat(u.Persistent, b.Size)
		}
	}
	set := collectOf(p, temps)
	// The lives by memory.
	counts := make([]int, len(set.devs))
	for _, k := range set.memory {
		counts[k]++
	}
	byMemory := make([][]int32, len(set.devs))
	for k, c := range counts {
		byMemory[k] = make([]int32, 0, c)
	}
	for x, k := range set.memory {
		byMemory[k] = append(byMemory[k], int32(x))
	}
	for k, dev := range set.devs {
		o := set.order(byMemory[k])
		u := use(dev)
		u.SubmittedPeak = set.submitted[k]
		u.Temporaries = len(o.members)
		for _, b := range o.bytes {
			u.TemporaryBytes = dag.AddSat(u.TemporaryBytes, b)
		}
		var peak []int32
		u.TemporaryPeak, peak, u.ArenaBytes = peakAndPack(o)
		for _, i := range peak {
			x := o.members[i]
			u.Peak = append(u.Peak, set.temps[x].Buffer)
			u.PeakOps = append(u.PeakOps, set.firstUse[x])
		}
	}
	if len(set.temps) > 0 {
		mem.Temporaries = slices.Clip(set.temps)
	}
	for _, u := range uses {
		mem.Memories = append(mem.Memories, *u)
	}
	slices.SortFunc(mem.Memories, func(a, b plan.MemoryUse) int { return cmp.Compare(a.Device, b.Device) })
	return mem
}

// peakAndPack returns o's peak (peakOf) and packs its arena (packArena).
// The packer's first try needs no peak: for a memory of many temporaries
// it runs beside the peak's flow, on another core where there is one.
func peakAndPack(o *lifeOrder) (int64, []int32, int64) {
	var weight int64
	var peak []int32
	if len(o.members) < minConcurrentPack {
		weight, peak = peakOf(o)
		return weight, peak, packArena(o, weight, firstPacking(o))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		weight, peak = peakOf(o)
	}()
	first := firstPacking(o)
	<-done
	return weight, peak, packArena(o, weight, first)
}

// minConcurrentPack is the fewest temporaries of a memory whose first
// packing runs beside the peak: below it, a goroutine costs more than it
// saves.
const minConcurrentPack = 512

// LifetimeSteps calls f, in submission order, for each step of p that
// allocates (allocates true) or frees one of temps, until f returns false.
// The ops that allocate and free each temporary are marked first, so the
// pass over the steps reads one number per step.
func LifetimeSteps(p *plan.Plan, temps []plan.Temporary, f func(t *plan.Temporary, allocates bool) bool) {
	mark := lifetimeMarks(len(p.Graph.Ops), temps)
	for _, st := range p.Steps {
		if st.Kind != plan.Run || st.Op < 0 || int(st.Op) >= len(mark) || mark[st.Op] == 0 {
			continue
		}
		k := mark[st.Op]
		if !f(&temps[max(k, -k)-1], k > 0) {
			return
		}
	}
}

// lifetimeMarks marks, by op of ops, the op that allocates each of temps
// with its index + 1, and the op that frees it with the negation.
func lifetimeMarks(ops int, temps []plan.Temporary) []int32 {
	mark := make([]int32, ops)
	for i, t := range temps {
		if t.Alloc >= 0 && int(t.Alloc) < len(mark) {
			mark[t.Alloc] = int32(i + 1)
		}
		if t.Free >= 0 && int(t.Free) < len(mark) {
			mark[t.Free] = -int32(i + 1)
		}
	}
	return mark
}

// roundUp rounds n up to ArenaAlign, saturating.
func roundUp(n int64) int64 {
	if n > math.MaxInt64-plan.ArenaAlign {
		return math.MaxInt64 &^ (plan.ArenaAlign - 1)
	}
	return (n + plan.ArenaAlign - 1) &^ (plan.ArenaAlign - 1)
}

// peakOf returns the heaviest set of temporaries of o no two of which are
// ordered (as indices of o.members, by buffer ID), and its weight: by
// Dilworth's theorem, weighted, the weight of all minus a maximum flow in
// which each temporary sends its bytes to the ones it is ordered before
// (Fulkerson's reduction), along the paths of o's DAG: each temporary is a
// node out (fed by the source) and a node in (drained to the sink), and
// flow into in may pass on through out.
func peakOf(o *lifeOrder) (int64, []int32) {
	return peakBy(o, (*flow).sourceSide)
}

// peakBy is peakOf with the minimum cut nearest the source found by
// sourceSide.
func peakBy(o *lifeOrder, sourceSide func(f *flow) []bool) (int64, []int32) {
	n := len(o.members)
	if n == 0 {
		return 0, nil
	}
	out := func(i int32) int { return int(i) }
	in := func(i int32) int { return n + int(i) }
	barrier := func(k int32) int { return 2*n + int(k) }
	edges := n + max(o.barriers-1, 0) + len(o.direct)
	for i := range n {
		if o.retiredAt[i] >= 0 {
			edges++
		}
		if o.startsAt[i] >= 0 {
			edges++
		}
	}
	f := newFlow(2*n+o.barriers, edges)
	// The arcs a greedy first flow goes along, by life and by barrier.
	retireArc, startArc := make([]int32, n), make([]int32, n)
	chainArc := make([]int32, max(o.barriers-1, 0))
	arc := func() int32 { return int32(len(f.to)) }
	for i, b := range o.bytes {
		f.source[out(int32(i))], f.sink[in(int32(i))] = b, b
		f.edge(in(int32(i)), out(int32(i)), math.MaxInt64)
		retireArc[i], startArc[i] = -1, -1
		if k := o.retiredAt[i]; k >= 0 {
			retireArc[i] = arc()
			f.edge(out(int32(i)), barrier(k), math.MaxInt64)
		}
		if k := o.startsAt[i]; k >= 0 {
			startArc[i] = arc()
			f.edge(barrier(k), in(int32(i)), math.MaxInt64)
		}
	}
	for k := int32(1); k < int32(o.barriers); k++ {
		chainArc[k-1] = arc()
		f.edge(barrier(k-1), barrier(k), math.MaxInt64)
	}
	prev := int32(0)
	for k, m := range o.byStart {
		for _, a := range o.direct[prev:o.directEnd[k]] {
			f.edge(out(o.byStart[a]), in(m), math.MaxInt64)
		}
		prev = o.directEnd[k]
	}
	// A first flow, greedily in the replay's order: each temporary takes
	// what it can from those retired before it started, oldest first,
	// through the barriers; the maximum flow goes on from there.
	send := func(a int32, d int64) {
		f.cap[a] -= d
		f.cap[a^1] = dag.AddSat(f.cap[a^1], d)
	}
	type offer struct {
		life int32
		left int64
	}
	chain := make([]int64, o.barriers+1) // differences of the flow along the barriers' chain
	byStart := o.byStart
	// The retired lives by barrier, each barrier's in the order they
	// started.
	retiredEnd := make([]int32, o.barriers+1)
	for _, i := range byStart {
		if k := o.retiredAt[i]; k >= 0 {
			retiredEnd[k+1]++
		}
	}
	for k := range o.barriers {
		retiredEnd[k+1] += retiredEnd[k]
	}
	byRetire := make([]int32, retiredEnd[o.barriers])
	for _, i := range byStart {
		if k := o.retiredAt[i]; k >= 0 {
			byRetire[retiredEnd[k]] = i
			retiredEnd[k]++
		}
	}
	pool := make([]offer, 0, len(byRetire)) // each retired life is offered once
	next := 0
	for _, m := range byStart {
		j := o.startsAt[m]
		if j < 0 {
			continue
		}
		for ; next < len(byRetire) && o.retiredAt[byRetire[next]] <= j; next++ {
			pool = append(pool, offer{byRetire[next], o.bytes[byRetire[next]]})
		}
		want := o.bytes[m]
		for want > 0 && len(pool) > 0 {
			x := &pool[0]
			d := min(want, x.left)
			f.source[out(x.life)] -= d
			send(retireArc[x.life], d)
			chain[o.retiredAt[x.life]] += d
			chain[j] -= d
			send(startArc[m], d)
			f.sink[in(m)] -= d
			want -= d
			if x.left -= d; x.left == 0 {
				pool = pool[1:]
			}
		}
	}
	var along int64
	for k, a := range chainArc {
		along += chain[k]
		if along > 0 {
			send(a, along)
		}
	}
	reach := sourceSide(f)
	var peak []int32
	var weight int64
	for i, b := range o.bytes {
		if reach[out(int32(i))] && !reach[in(int32(i))] {
			peak = append(peak, int32(i))
			weight = dag.AddSat(weight, b)
		}
	}
	buffer := func(i int32) int { return o.set.temps[o.members[i]].Buffer }
	slices.SortFunc(peak, func(a, b int32) int { return cmp.Compare(buffer(a), buffer(b)) })
	return weight, peak
}
