package planner

import (
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/perf"
)

// placer is the seam between a placement strategy and the assigner: it
// chooses which op the assigner places next, and hears when it is placed.
// It must give every op once, each after all of its Deps.
type placer interface {
	// next returns the op to place and its pool, or -1 for a pool the
	// assigner is to look up.
	next() (op, pool int32, ok bool)
	placed(op int32)
}

// declarationOrder places ops in ID order: the order they were declared.
type declarationOrder struct{ i, n int32 }

func (d *declarationOrder) next() (int32, int32, bool) {
	if d.i >= d.n {
		return 0, 0, false
	}
	d.i++
	return d.i - 1, -1, true
}

func (d *declarationOrder) placed(int32) {}

// listOrder is list scheduling: among the ops whose dependencies are
// placed, the one that can start earliest on its pool's first free stream,
// ties broken by bottom level, then priority, then ID. With a lookahead
// window (nextInWindow), every op that can start within the window of the
// earliest start counts as starting then: the longer path to the end goes
// first, even where that leaves a stream idle for a moment.
//
// Each pool keeps two heaps: ops still waiting for their inputs, by the
// time their inputs are ready, and ops ready by the time the pool has a free
// stream (with a window: by the earliest start plus the window), by bottom
// level. Those times only grow, so an op moves from the first heap to the
// second once. Choosing the next op looks at the top of each pool's heaps:
// O(log V) per op plus the pools.
type listOrder struct {
	a       *assigner
	window  int64   // the lookahead; 0: none
	ready   []int64 // per released op: when its last dependency finishes
	missing []int32 // per op: dependencies (and ordered predecessors) not yet placed
	succOff []int32 // the successors of op i are succ[succOff[i]:succOff[i+1]]
	succ    []int32
	// nextOrdered maps an op of a kind that keeps declaration order to the
	// next op of that kind; absent when there is none.
	nextOrdered map[int32]int32
	queues      []poolQueue // by pool ID p: 2p for most ops, 2p+1 for ops that fill the device
	fills       []bool      // per op: whether it fills its device (perf.Fills)
	opPool      []int32     // per released op: its pool
	freesFirst  bool        // Objective.freesFirst: ops that free a temporary go first among equals
	room        []int32     // for the heaps' first 16 IDs (opHeap.push)
}

type poolQueue struct {
	waiting opHeap // by ready time, then listOrder.before
	ready   opHeap // by listOrder.before
	// early holds the ops of ready by ready time, with a window: the
	// earliest of them bounds when the pool can start one. Placed ops leave
	// it lazily, when they come to the top.
	early opHeap
}

// newListOrder makes the list order of a's candidate, in the room of the
// list order of a's previous candidate where a has one (newAssigner).
func newListOrder(a *assigner, ordered func(dag.OpKind) bool, window int64) *listOrder {
	n := len(a.ops)
	a.costs.successors(a.ops)
	l := a.list
	if l == nil {
		i32 := make([]int32, 2*n)
		l = &listOrder{ready: make([]int64, n), missing: i32[:n:n], opPool: i32[n:]}
		a.list = l
	} else {
		clear(l.ready)
		clear(l.opPool)
		clear(l.nextOrdered)
		for i := range l.queues {
			q := &l.queues[i]
			q.waiting.ids, q.ready.ids, q.early.ids = q.waiting.ids[:0], q.ready.ids[:0], q.early.ids[:0]
		}
		l.queues = l.queues[:0]
	}
	l.a, l.window, l.succOff, l.succ, l.fills = a, window, a.costs.succOff, a.costs.succ, a.fill
	l.freesFirst = a.opts.Objective.freesFirst(a.opts.PoolTemporaries)
	for i, op := range a.ops {
		l.missing[i] = int32(len(op.Deps))
	}
	if anyKind(ordered) {
		var lastOfKind map[dag.OpKind]int32
		for i, op := range a.ops {
			if !ordered(op.Kind) {
				continue
			}
			if lastOfKind == nil {
				lastOfKind = map[dag.OpKind]int32{}
				if l.nextOrdered == nil {
					l.nextOrdered = map[int32]int32{}
				}
			}
			if prev, ok := lastOfKind[op.Kind]; ok {
				l.nextOrdered[prev] = int32(i)
				l.missing[i]++
			}
			lastOfKind[op.Kind] = int32(i)
		}
	}
	for i := range n {
		if l.missing[i] == 0 {
			l.release(int32(i))
		}
	}
	return l
}

// anyKind reports whether some op kind is one that f accepts.
func anyKind(f func(dag.OpKind) bool) bool {
	for k := dag.OpKind(0); k.Valid(); k++ {
		if f(k) {
			return true
		}
	}
	return false
}

// release queues op i, whose dependencies are all placed. Ops that fill
// their device (perf.Fills) queue apart from the rest of their pool: they
// can start no sooner than the device's multiprocessors are free.
func (l *listOrder) release(i int32) {
	op := l.a.ops[i]
	p := l.a.poolFor(op)
	l.opPool[i] = p
	q := 2 * p
	if l.fills[i] {
		q++
	}
	if l.queues == nil {
		l.queues = make([]poolQueue, 0, 8)
	}
	for int(q) >= len(l.queues) {
		var old poolQueue // a previous candidate's, whose heaps' room this one takes
		if k := len(l.queues); k < cap(l.queues) {
			old = l.queues[:k+1][k]
		}
		l.queues = append(l.queues, poolQueue{waiting: opHeap{ids: old.waiting.ids, l: l, byReady: true},
			ready: opHeap{ids: old.ready.ids, l: l}, early: opHeap{ids: old.early.ids, l: l, byReady: true}})
	}
	l.queues[q].waiting.push(i)
}

func (l *listOrder) next() (int32, int32, bool) {
	if l.window > 0 {
		return l.nextInWindow()
	}
	best, bestStart := int32(-1), int64(0)
	var from *opHeap
	for qi := range l.queues {
		q := &l.queues[qi]
		if len(q.waiting.ids) == 0 && len(q.ready.ids) == 0 {
			continue
		}
		free := l.queueFree(qi)
		for len(q.waiting.ids) > 0 && l.ready[q.waiting.ids[0]] <= free {
			q.ready.push(q.waiting.pop())
		}
		h, start := &q.ready, free
		if len(h.ids) == 0 {
			h = &q.waiting
			start = l.ready[h.ids[0]]
		}
		if id := h.ids[0]; best < 0 || start < bestStart || start == bestStart && l.before(id, best) {
			best, bestStart, from = id, start, h
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	from.pop()
	return best, l.opPool[best], true
}

// nextInWindow is next with a window: t0 is the earliest time any
// released op can start, and among the ops that can start by t0 + window,
// the one first by before goes. t0 never decreases (every op starts at t0
// or later, and its successors are ready later still), so an op moves from
// waiting to ready once.
func (l *listOrder) nextInWindow() (int32, int32, bool) {
	t0 := int64(-1)
	for p := range l.queues {
		q := &l.queues[p]
		for len(q.early.ids) > 0 && l.missing[q.early.ids[0]] < 0 {
			q.early.pop()
		}
		r := int64(-1)
		if len(q.early.ids) > 0 {
			r = l.ready[q.early.ids[0]]
		}
		if len(q.waiting.ids) > 0 && (r < 0 || l.ready[q.waiting.ids[0]] < r) {
			r = l.ready[q.waiting.ids[0]]
		}
		if r < 0 {
			continue
		}
		if s := max(r, l.queueFree(p)); t0 < 0 || s < t0 {
			t0 = s
		}
	}
	if t0 < 0 {
		return 0, 0, false
	}
	horizon := dag.AddSat(t0, l.window)
	best := int32(-1)
	var from *opHeap
	for p := range l.queues {
		q := &l.queues[p]
		if len(q.waiting.ids) == 0 && len(q.ready.ids) == 0 || l.queueFree(p) > horizon {
			continue
		}
		for len(q.waiting.ids) > 0 && l.ready[q.waiting.ids[0]] <= horizon {
			i := q.waiting.pop()
			q.ready.push(i)
			q.early.push(i)
		}
		if len(q.ready.ids) > 0 && (best < 0 || l.before(q.ready.ids[0], best)) {
			best, from = q.ready.ids[0], &q.ready
		}
	}
	from.pop()
	l.missing[best] = -1 // placed: early drops it
	return best, l.opPool[best], true
}

// queueFree is the earliest time an op of queue qi can start for want of a
// stream: its pool's first free stream, and for ops that fill the device,
// the device's multiprocessors as well.
func (l *listOrder) queueFree(qi int) int64 {
	p := int32(qi / 2)
	free := l.a.poolFree(p)
	if qi%2 == 1 {
		free = max(free, l.a.smFreeOf(l.a.pools[p].key.device))
	}
	return free
}

func (l *listOrder) placed(i int32) {
	end := l.a.finishOf(i)
	for _, s := range l.succ[l.succOff[i]:l.succOff[i+1]] {
		l.ready[s] = max(l.ready[s], end)
		if l.missing[s]--; l.missing[s] == 0 {
			l.release(s)
		}
	}
	if s, ok := l.nextOrdered[i]; ok {
		if l.missing[s]--; l.missing[s] == 0 {
			l.release(s)
		}
	}
}

// frees says whether op x frees a temporary and the objective places
// such ops first (Objective.freesFirst).
func (l *listOrder) frees(x int32) bool {
	return l.freesFirst && l.a.ops[x].Kind.Info().Lifetime == dag.Frees
}

// before says whether op x goes before op y when both can start at the
// same time: where the objective says so (Objective.freesFirst), an op
// that frees a temporary first, then the longer
// path to the end, then the higher priority,
// then the op declared first. Two ops that fill their device skip the
// first rule: the device runs them one after the other whichever goes
// first, so a longer path gains nothing by starting early, while taking
// them in declared order keeps a pipeline's chunks in order (measured on
// the H100: examples/mlp_stream.yaml ran 3-5% slower with its chunks
// interleaved by path length).
func (l *listOrder) before(x, y int32) bool {
	if fx, fy := l.frees(x), l.frees(y); fx != fy {
		return fx
	}
	if bx, by := l.a.bottom[x], l.a.bottom[y]; bx != by && !(l.fills[x] && l.fills[y]) {
		return bx > by
	}
	if px, py := l.a.ops[x].Priority, l.a.ops[y].Priority; px != py {
		return px > py
	}
	return x < y
}

// opHeap is a binary heap of op IDs. Its order is a strict total order
// that does not change while an op is in it (ready times are final once
// an op is released, and before breaks every tie by ID), so what it pops
// does not depend on how the heap is laid out.
type opHeap struct {
	ids     []int32
	l       *listOrder
	byReady bool
}

func (h *opHeap) less(x, y int32) bool {
	if h.byReady {
		if rx, ry := h.l.ready[x], h.l.ready[y]; rx != ry {
			return rx < ry
		}
	}
	return h.l.before(x, y)
}

func (h *opHeap) push(id int32) {
	if h.ids == nil {
		// Grown from 1, a heap of a few ops is made several times over:
		// it starts with room for 16, cut from one allocation for all.
		l := h.l
		if len(l.room) < 16 {
			l.room = make([]int32, 16*8)
		}
		h.ids, l.room = l.room[:0:16], l.room[16:]
	}
	h.ids = append(h.ids, id)
	ids := h.ids
	for i := len(ids) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(ids[i], ids[p]) {
			break
		}
		ids[i], ids[p] = ids[p], ids[i]
		i = p
	}
}

func (h *opHeap) pop() int32 {
	ids := h.ids
	id := ids[0]
	n := len(ids) - 1
	ids[0] = ids[n]
	ids = ids[:n]
	h.ids = ids
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.less(ids[r], ids[c]) {
			c = r
		}
		if !h.less(ids[c], ids[i]) {
			break
		}
		ids[i], ids[c] = ids[c], ids[i]
		i = c
	}
	return id
}

// ordering is one order in which to place ops; a strategy plans with one
// or more.
type ordering uint8

const (
	byEarliestStart ordering = iota // listOrder
	byLookahead                     // listOrder with a window of half the mean op
	byDeclaration                   // declarationOrder
)

func (o ordering) placer(a *assigner, ordered func(dag.OpKind) bool) placer {
	if o == byDeclaration {
		return &declarationOrder{n: int32(len(a.ops))}
	}
	if ordered == nil {
		ordered = func(k dag.OpKind) bool { return k.Info().Ordered }
	}
	var window int64
	if o == byLookahead && len(a.dur) > 0 {
		var sum int64
		for _, d := range a.dur {
			sum = dag.AddSat(sum, d)
		}
		window = sum / int64(len(a.dur)) / 2
	}
	return newListOrder(a, ordered, window)
}

var orderingNames = [...]string{byEarliestStart: "earliest start", byLookahead: "lookahead", byDeclaration: "declaration order"}

func (o ordering) String() string { return orderingNames[o] }

// strategy is the strategy an ordering belongs to, for Stats.
func (o ordering) strategy() Strategy {
	if o == byDeclaration {
		return DeclarationOrder
	}
	return ListScheduling
}

// maxTriedOps is the largest graph on which list scheduling tries its
// other orderings. They triple the planning time, which a graph of this
// size pays in tens of milliseconds (BENCHMARKS.md: 85 ms for all three at
// 16,384 ops on the loaded build machine), while a graph of a million ops,
// whose eager host submissions alone keep its plan above the bound, would
// take seconds more to plan.
const maxTriedOps = 1 << 14

// closeEnough says whether a makespan is within 1% of a lower bound.
func closeEnough(makespan, bound int64) bool {
	return makespan <= dag.AddSat(bound, bound/100)
}

// lowerBound is a makespan no plan of g under opts can beat: the largest of
// the critical path, each pool's work over the streams it may have (as
// poolFor allows: the budget for compute, one stream otherwise), and the
// host's submissions of every op, one after another (for an eager run, the
// ops alone; for a replay, the graph launch's per-op time). p is a plan of
// g, whose streams tell each op's pool.
func lowerBound(g *dag.Graph, opts Options, p *Plan) int64 {
	ov := perf.OverheadsOf(opts.Cost)
	perOp := ov.Submit
	if opts.Mode == Replay {
		perOp = ov.ReplayOp
	}
	b := max(int64(p.Stats.CriticalPath), perf.SatMul(perf.NonNegative(perOp), int64(len(g.Ops))))
	work := make([]int64, len(p.Streams))
	for i, s := range p.OpStream {
		work[s] = dag.AddSat(work[s], perf.NonNegative(opts.Cost.Duration(g.Ops[i])))
	}
	pools := map[poolKey]int64{}
	for s, st := range p.Streams {
		k := poolKey{device: st.Device, priority: st.Priority, kind: st.Kind}
		pools[k] = dag.AddSat(pools[k], work[s])
	}
	for k, w := range pools {
		limit := int64(1)
		if k.kind == Compute {
			limit = int64(opts.Streams)
		}
		b = max(b, w/limit)
	}
	return b
}
