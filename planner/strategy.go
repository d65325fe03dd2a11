package planner

import (
	"container/heap"
	"slices"

	"github.com/dagrun/dagrun/dag"
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
// ties broken by bottom level, then priority, then ID.
//
// Each pool keeps two heaps: ops still waiting for their inputs, by the
// time their inputs are ready, and ops ready by the time the pool has a free
// stream, by bottom level. A pool's earliest free time only grows, so an op
// moves from the first heap to the second once. Choosing the next op looks
// at the top of each pool's heaps: O(log V) per op plus the pools.
type listOrder struct {
	a       *assigner
	ready   []int64 // per released op: when its last dependency finishes
	missing []int32 // per op: dependencies (and ordered predecessors) not yet placed
	succOff []int32 // the successors of op i are succ[succOff[i]:succOff[i+1]]
	succ    []int32
	// nextOrdered maps an op of a kind that keeps declaration order to the
	// next op of that kind; absent when there is none.
	nextOrdered map[int32]int32
	queues      []poolQueue // by pool ID p: 2p for most ops, 2p+1 for ops that fill the device
	opPool      []int32     // per released op: its pool
}

type poolQueue struct {
	waiting opHeap // by ready time, then listOrder.before
	ready   opHeap // by listOrder.before
}

func newListOrder(a *assigner, ordered func(dag.OpKind) bool) *listOrder {
	n := len(a.ops)
	l := &listOrder{
		a:       a,
		ready:   make([]int64, n),
		missing: make([]int32, n),
		succOff: make([]int32, n+1),
		opPool:  make([]int32, n),
	}
	edges := 0
	for i, op := range a.ops {
		for _, d := range op.Deps {
			l.succOff[d+1]++
		}
		edges += len(op.Deps)
		l.missing[i] = int32(len(op.Deps))
	}
	for i := range n {
		l.succOff[i+1] += l.succOff[i]
	}
	l.succ = make([]int32, edges)
	next := l.opPool // borrowed (each op's pool is set on release): where its next successor goes
	copy(next, l.succOff[:n])
	for i, op := range a.ops {
		for _, d := range op.Deps {
			l.succ[next[d]] = int32(i)
			next[d]++
		}
	}
	if slices.ContainsFunc(dag.OpKinds(), ordered) {
		var lastOfKind map[dag.OpKind]int32
		for i, op := range a.ops {
			if !ordered(op.Kind) {
				continue
			}
			if lastOfKind == nil {
				lastOfKind, l.nextOrdered = map[dag.OpKind]int32{}, map[int32]int32{}
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

// release queues op i, whose dependencies are all placed. Ops that fill
// their device (fills.go) queue apart from the rest of their pool: they
// can start no sooner than the device's multiprocessors are free.
func (l *listOrder) release(i int32) {
	op := l.a.ops[i]
	p := l.a.poolFor(op)
	l.opPool[i] = p
	q := 2 * p
	if fills(op, l.a.opts.SMs) {
		q++
	}
	for int(q) >= len(l.queues) {
		l.queues = append(l.queues, poolQueue{waiting: opHeap{l: l, byReady: true}, ready: opHeap{l: l}})
	}
	l.queues[q].waiting.push(i)
}

func (l *listOrder) next() (int32, int32, bool) {
	best, bestStart := int32(-1), int64(0)
	var from *opHeap
	for qi := range l.queues {
		q := &l.queues[qi]
		if len(q.waiting.ids) == 0 && len(q.ready.ids) == 0 {
			continue
		}
		p := int32(qi / 2)
		free := l.a.poolFree(p)
		if qi%2 == 1 {
			free = max(free, l.a.smFreeOf(l.a.pools[p].key.device))
		}
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

// before says whether op x goes before op y when both can start at the
// same time: the longer path to the end first, then the higher priority,
// then the op declared first.
func (l *listOrder) before(x, y int32) bool {
	if bx, by := l.a.bottom[x], l.a.bottom[y]; bx != by {
		return bx > by
	}
	if px, py := l.a.ops[x].Priority, l.a.ops[y].Priority; px != py {
		return px > py
	}
	return x < y
}

// opHeap is a heap of op IDs for container/heap. push and pop keep IDs
// unboxed; Push and Pop exist for heap.Interface.
type opHeap struct {
	ids     []int32
	l       *listOrder
	byReady bool
}

func (h *opHeap) Len() int { return len(h.ids) }

func (h *opHeap) Less(i, j int) bool {
	x, y := h.ids[i], h.ids[j]
	if h.byReady {
		if rx, ry := h.l.ready[x], h.l.ready[y]; rx != ry {
			return rx < ry
		}
	}
	return h.l.before(x, y)
}

func (h *opHeap) Swap(i, j int) { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }

func (h *opHeap) Push(x any) { h.ids = append(h.ids, x.(int32)) }

func (h *opHeap) Pop() any {
	n := len(h.ids) - 1
	x := h.ids[n]
	h.ids = h.ids[:n]
	return x
}

func (h *opHeap) push(id int32) {
	h.ids = append(h.ids, id)
	heap.Fix(h, len(h.ids)-1)
}

func (h *opHeap) pop() int32 {
	id := h.ids[0]
	n := len(h.ids) - 1
	h.ids[0] = h.ids[n]
	h.ids = h.ids[:n]
	if n > 0 {
		heap.Fix(h, 0)
	}
	return id
}
