package dag

import (
	"fmt"
	"slices"
)

// MaxEdges caps the dependencies a graph may imply. The rules can imply a
// quadratic number (n disjoint writers of a buffer and then n readers of all
// of it give n*n edges); past the cap Build refuses the graph, naming the op
// that crosses it, instead of spending minutes and gigabytes on it.
const MaxEdges = 10_000_000

// maxInferenceWork caps the byte ranges inference may visit. Visits are
// bounded by the edges they imply except where ops write many interleaved
// ranges of a buffer (one op writing every even element, another every odd
// one) and wide reads then visit all of those ranges for two edges each.
// The cap turns that quadratic case into an error; a valid million-op graph
// visits a few million.
const maxInferenceWork = 2 * MaxEdges

// inferDeps sets every op's Deps from its accesses, in declaration order:
// a read depends on the last writer of each byte it reads (RAW), a write on
// that writer and every reader since (WAW, WAR). Ops with unusable accesses
// take no part. Each buffer keeps two treaps: the byte ranges of its last
// writers (disjoint segments ordered by start), and the ranges read since
// they were last written (an interval tree), so that every access costs
// O(log n) plus the edges it implies, in whatever order views are declared.
// It returns an error, and leaves Deps partial, when the graph implies more
// than MaxEdges or visits more than maxInferenceWork ranges.
func inferDeps(ops []*Op, nbufs int) *Error {
	idx := segIndex{rng: 0x9e3779b97f4a7c15}
	rd := readIndex{rng: 0x2545f4914f6cdd1d}
	// A body's ops touch few of the graph's buffers: index those alone,
	// so that a graph of many small bodies and many buffers stays linear.
	var slots map[int]int
	if nbufs > 64 && nbufs > 4*len(ops) {
		slots = map[int]int{}
		for _, o := range ops {
			for _, a := range o.Access {
				if _, ok := slots[a.Buf.ID]; !ok && !o.badAccess {
					slots[a.Buf.ID] = len(slots)
				}
			}
		}
		nbufs = len(slots)
	}
	both := make([]int32, 2*nbufs)
	roots, rroots := both[:nbufs], both[nbufs:] // writer segments and reads per buffer
	for i := range both {
		both[i] = -1
	}
	// The treaps' nodes, sized for what a graph of chained ops takes (a
	// segment per buffer and a few more, and reads as they pile up),
	// which doubling from 8 reaches by making them several times over.
	accesses := 0
	for _, o := range ops {
		accesses += len(o.Access)
	}
	idx.nodes = make([]segNode, 0, min(nbufs+accesses/8, 1<<16))
	rd.nodes = make([]readNode, 0, min(accesses/3, 1<<16))
	mark := make([]int32, len(ops)) // mark[d] == i+1: d is already a dep of op i
	var arena depArena
	scratch := make([]int32, 0, 16)
	total := 0
	for i, o := range ops {
		o.Deps = nil
		if o.badAccess {
			continue
		}
		me := int32(i)
		scratch = scratch[:0]
		add := func(d int32) {
			if d >= 0 && d != me && mark[d] != me+1 {
				mark[d] = me + 1
				scratch = append(scratch, d)
			}
		}
		for _, a := range o.Access {
			id := a.Buf.ID
			if slots != nil {
				id = slots[id]
			}
			if roots[id] < 0 {
				roots[id] = idx.node(0, a.Buf.Size, -1)
			}
			start, end := a.Offset, a.Offset+a.Size
			roots[id] = idx.access(roots[id], start, end, me, a.Mode.Writes(), add)
			if a.Mode.Writes() {
				rroots[id] = rd.overwrite(rroots[id], start, end, start == 0 && end == a.Buf.Size, add)
			} else {
				rroots[id] = rd.insert(rroots[id], rd.node(start, end, me))
			}
		}
		if idx.work+rd.work > maxInferenceWork {
			return &Error{Op: o.Name, Msg: fmt.Sprintf("inferring the dependencies up to this op visits more than %d byte ranges", maxInferenceWork),
				Hint: "give the ops coarser views (fewer, larger byte ranges of each buffer), or split the buffer", decl: o.decl}
		}
		total += len(scratch)
		if total > MaxEdges {
			return &Error{Op: o.Name, Msg: fmt.Sprintf("the graph implies more than %d dependencies by the time of this op (it alone adds %d)", MaxEdges, len(scratch)),
				Hint: "order the work with an explicit after, or give the ops coarser views so fewer of them conflict", decl: o.decl}
		}
		o.Deps = arena.keep(scratch)
	}
	return nil
}

// depArena hands out Deps slices from large blocks, so that a million ops
// cost a few allocations instead of a million. Blocks start small and
// double, so a body of two ops does not take a large one.
type depArena struct{ block []int32 }

func (a *depArena) keep(d []int32) []int32 {
	if len(d) == 0 {
		return nil
	}
	if cap(a.block)-len(a.block) < len(d) {
		a.block = make([]int32, 0, max(min(2*cap(a.block), 1<<16), 16, len(d)))
	}
	n := len(a.block)
	a.block = append(a.block, d...)
	return a.block[n:len(a.block):len(a.block)] // full: appends to Deps copy
}

// segNode is a byte range [start, end) of a buffer with the last op that
// wrote it, in a treap ordered by start.
//
// Why two treaps (segNode here, readNode below) rather than one: the
// writers' segments are disjoint, so they need neither a tie-break nor the
// maxEnd augmentation that finds overlapping reads. One treap of readNodes
// serving both (tried) made the writers' index 5 to 13% slower on
// BenchmarkBuildHostile and its nodes a quarter larger, which at a million
// ops took the node slice past a doubling (137 to 239 bytes per op). They
// share their priorities (xorshift) and growth (grow).
type segNode struct {
	start, end  int64
	writer      int32
	left, right int32
	prio        uint32
}

// segIndex holds the treaps of every buffer in one slice of nodes.
type segIndex struct {
	nodes []segNode
	free  []int32
	rng   uint64
	work  int64 // segments visited, for maxInferenceWork
}

// xorshift returns the next of a fast, fixed sequence of treap priorities.
func xorshift(r *uint64) uint32 {
	*r ^= *r << 13
	*r ^= *r >> 7
	*r ^= *r << 17
	return uint32(*r >> 32)
}

// grow doubles s when full: append grows large slices by a quarter, which
// copies (and faults in) the nodes four times over.
func grow[T any](s []T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 8))
	}
	return s
}

func (x *segIndex) node(start, end int64, writer int32) int32 {
	n := segNode{start: start, end: end, writer: writer, left: -1, right: -1, prio: xorshift(&x.rng)}
	if k := len(x.free); k > 0 {
		id := x.free[k-1]
		x.free = x.free[:k-1]
		x.nodes[id] = n
		return id
	}
	x.nodes = append(grow(x.nodes), n)
	return int32(len(x.nodes) - 1)
}

// split divides treap t into the nodes starting before key and the rest.
func (x *segIndex) split(t int32, key int64) (int32, int32) {
	if t < 0 {
		return -1, -1
	}
	n := &x.nodes[t]
	if n.start < key {
		l, r := x.split(n.right, key)
		x.nodes[t].right = l
		return t, r
	}
	l, r := x.split(n.left, key)
	x.nodes[t].left = r
	return l, t
}

// merge joins treaps l and r, every start of l before every start of r.
func (x *segIndex) merge(l, r int32) int32 {
	switch {
	case l < 0:
		return r
	case r < 0:
		return l
	}
	if x.nodes[l].prio > x.nodes[r].prio {
		x.nodes[l].right = x.merge(x.nodes[l].right, r)
		return l
	}
	x.nodes[r].left = x.merge(l, x.nodes[r].left)
	return r
}

func (x *segIndex) last(t int32) int32 {
	for x.nodes[t].right >= 0 {
		t = x.nodes[t].right
	}
	return t
}

// cut makes the segment of l that covers off (if any) end at off, and
// returns the rest of it as a new treap of one node (else -1).
func (x *segIndex) cut(l int32, off int64) int32 {
	if l < 0 {
		return -1
	}
	m := x.last(l)
	if x.nodes[m].end <= off {
		return -1
	}
	end := x.nodes[m].end
	x.nodes[m].end = off
	return x.node(off, end, x.nodes[m].writer)
}

// access records op me's use of [start, end) in treap t, calls add for every
// op it depends on, and returns the new treap.
func (x *segIndex) access(t int32, start, end int64, me int32, writes bool, add func(int32)) int32 {
	if n := &x.nodes[t]; n.left < 0 && n.right < 0 && n.start == start && n.end == end {
		x.visit(t, add) // the common case: one segment, all of it
		if writes {
			n.writer = me
		}
		return t
	}
	if !writes {
		x.visitRange(t, start, end, add) // reads leave the segments as they are
		return t
	}
	l, r := x.split(t, start)
	if y := x.cut(l, start); y >= 0 {
		r = x.merge(y, r)
	}
	m, r := x.split(r, end)
	if y := x.cut(m, end); y >= 0 {
		r = x.merge(y, r)
	}
	x.walk(m, func(s int32) { x.visit(s, add); x.free = append(x.free, s) })
	m = x.node(start, end, me)
	return x.merge(x.merge(l, m), r)
}

// visitRange visits the segments of t that overlap [start, end), in order.
// Segments are disjoint, so a segment left of the range has no overlapping
// left subtree, and one right of it no overlapping right subtree.
func (x *segIndex) visitRange(t int32, start, end int64, add func(int32)) {
	for t >= 0 {
		n := &x.nodes[t]
		switch {
		case n.end <= start:
			t = n.right
		case n.start >= end:
			t = n.left
		default:
			x.visitRange(n.left, start, end, add)
			x.visit(t, add)
			t = n.right
		}
	}
}

// visit adds the dep that segment s gives.
func (x *segIndex) visit(s int32, add func(int32)) {
	add(x.nodes[s].writer)
	x.work++
}

// walk calls f on every node of t in order of start.
func (x *segIndex) walk(t int32, f func(int32)) {
	for t >= 0 {
		x.walk(x.nodes[t].left, f)
		f(t)
		t = x.nodes[t].right
	}
}

// readNode is a byte range [start, end) that op read and nobody has written
// since, in a treap ordered by (start, node index) and augmented with the
// largest end in its subtree, so that the reads a write overlaps are found
// in O(log n) plus their number.
type readNode struct {
	start, end, maxEnd int64
	op                 int32
	left, right        int32
	prio               uint32
}

// readIndex holds the read treaps of every buffer in one slice of nodes.
type readIndex struct {
	nodes []readNode
	free  []int32
	found []int32
	rng   uint64
	work  int64 // reads visited, for maxInferenceWork
}

func (x *readIndex) node(start, end int64, op int32) int32 {
	n := readNode{start: start, end: end, maxEnd: end, op: op, left: -1, right: -1, prio: xorshift(&x.rng)}
	if k := len(x.free); k > 0 {
		id := x.free[k-1]
		x.free = x.free[:k-1]
		x.nodes[id] = n
		return id
	}
	x.nodes = append(grow(x.nodes), n)
	return int32(len(x.nodes) - 1)
}

func (x *readIndex) less(a, b int32) bool {
	sa, sb := x.nodes[a].start, x.nodes[b].start
	return sa < sb || sa == sb && a < b
}

func (x *readIndex) update(t int32) {
	n := &x.nodes[t]
	m := n.end
	if n.left >= 0 {
		m = max(m, x.nodes[n.left].maxEnd)
	}
	if n.right >= 0 {
		m = max(m, x.nodes[n.right].maxEnd)
	}
	n.maxEnd = m
}

// split divides t into the nodes ordered before node k and the rest.
func (x *readIndex) split(t, k int32) (int32, int32) {
	if t < 0 {
		return -1, -1
	}
	if x.less(t, k) {
		l, r := x.split(x.nodes[t].right, k)
		x.nodes[t].right = l
		x.update(t)
		return t, r
	}
	l, r := x.split(x.nodes[t].left, k)
	x.nodes[t].left = r
	x.update(t)
	return l, t
}

func (x *readIndex) merge(l, r int32) int32 {
	switch {
	case l < 0:
		return r
	case r < 0:
		return l
	}
	if x.nodes[l].prio > x.nodes[r].prio {
		x.nodes[l].right = x.merge(x.nodes[l].right, r)
		x.update(l)
		return l
	}
	x.nodes[r].left = x.merge(l, x.nodes[r].left)
	x.update(r)
	return r
}

func (x *readIndex) insert(t, k int32) int32 {
	l, r := x.split(t, k)
	return x.merge(x.merge(l, k), r)
}

// erase takes node k out of t.
func (x *readIndex) erase(t, k int32) int32 {
	if t == k {
		return x.merge(x.nodes[t].left, x.nodes[t].right)
	}
	if x.less(k, t) {
		x.nodes[t].left = x.erase(x.nodes[t].left, k)
	} else {
		x.nodes[t].right = x.erase(x.nodes[t].right, k)
	}
	x.update(t)
	return t
}

// collect appends the nodes of t that overlap [start, end) to x.found.
func (x *readIndex) collect(t int32, start, end int64) {
	for t >= 0 && x.nodes[t].maxEnd > start {
		n := &x.nodes[t]
		x.collect(n.left, start, end)
		if n.start >= end {
			return
		}
		if n.end > start {
			x.found = append(x.found, t)
		}
		t = n.right
	}
}

// overwrite is a write of [start, end) (all of the buffer when whole): it
// adds a dep on every op that read those bytes since they were last
// written, and keeps only the parts of those reads that stay unwritten.
func (x *readIndex) overwrite(t int32, start, end int64, whole bool, add func(int32)) int32 {
	if t < 0 {
		return t
	}
	x.found = x.found[:0]
	x.collect(t, start, end)
	x.work += int64(len(x.found))
	if whole {
		for _, f := range x.found {
			add(x.nodes[f].op)
			x.free = append(x.free, f)
		}
		return -1
	}
	for _, f := range x.found {
		t = x.erase(t, f)
	}
	for _, f := range x.found {
		n := x.nodes[f]
		add(n.op)
		x.free = append(x.free, f)
		if n.start < start {
			t = x.insert(t, x.node(n.start, start, n.op))
		}
		if n.end > end {
			t = x.insert(t, x.node(end, n.end, n.op))
		}
	}
	return t
}
