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

// maxInferenceWork caps the segments (and readers of them) inference may
// visit. Visits are bounded by the edges they imply in every case but one:
// many narrow reads cut a buffer into many segments, and then wide reads
// each visit all of them while implying few edges (the readers' lists grow
// without edges to show for it). The cap turns that quadratic case into an
// error; a valid million-op graph visits a few million.
const maxInferenceWork = 2 * MaxEdges

// inferDeps sets every op's Deps from its accesses, in declaration order:
// a read depends on the last writer of each byte it reads (RAW), a write on
// that writer and every reader since (WAW, WAR). Ops with unusable accesses
// take no part. The byte ranges of each buffer are kept in a treap
// of segments, so that every access costs O(log n) plus the segments it
// touches, in whatever order views are declared. It returns an error, and
// leaves Deps partial, when the graph implies more than MaxEdges.
func inferDeps(ops []*Op, nbufs int) *Error {
	idx := segIndex{rng: 0x9e3779b97f4a7c15}
	roots := make([]int32, nbufs)
	for i := range roots {
		roots[i] = -1
	}
	mark := make([]int32, len(ops)) // mark[d] == i+1: d is already a dep of op i
	var arena depArena
	var scratch []int32
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
			if roots[id] < 0 {
				roots[id] = idx.node(0, a.Buf.Size, -1, nil)
			}
			roots[id] = idx.access(roots[id], a.Offset, a.Offset+a.Size, me, a.Mode.Writes(), add)
		}
		if idx.work > maxInferenceWork {
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
// cost a few allocations instead of a million.
type depArena struct{ block []int32 }

func (a *depArena) keep(d []int32) []int32 {
	if len(d) == 0 {
		return nil
	}
	if cap(a.block)-len(a.block) < len(d) {
		a.block = make([]int32, 0, max(1<<16, len(d)))
	}
	n := len(a.block)
	a.block = append(a.block, d...)
	return a.block[n:len(a.block):len(a.block)] // full: appends to Deps copy
}

// segNode is a byte range [start, end) of a buffer with the last op that
// wrote it and the ops that read it since, in a treap ordered by start.
type segNode struct {
	start, end  int64
	writer      int32
	readers     []int32
	left, right int32
	prio        uint32
}

// segIndex holds the treaps of every buffer in one slice of nodes.
type segIndex struct {
	nodes []segNode
	free  []int32
	rng   uint64
	work  int64 // segments and readers visited, for maxInferenceWork
}

func (x *segIndex) node(start, end int64, writer int32, readers []int32) int32 {
	x.rng ^= x.rng << 13
	x.rng ^= x.rng >> 7
	x.rng ^= x.rng << 17
	n := segNode{start: start, end: end, writer: writer, readers: readers, left: -1, right: -1, prio: uint32(x.rng >> 32)}
	if k := len(x.free); k > 0 {
		id := x.free[k-1]
		x.free = x.free[:k-1]
		n.readers = append(x.nodes[id].readers[:0], readers...)
		x.nodes[id] = n
		return id
	}
	n.readers = slices.Clone(readers)
	if len(x.nodes) == cap(x.nodes) {
		// Double: append grows large slices by a quarter, which copies
		// (and faults in) the nodes four times over.
		x.nodes = slices.Grow(x.nodes, max(len(x.nodes), 64))
	}
	x.nodes = append(x.nodes, n)
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
	return x.node(off, end, x.nodes[m].writer, x.nodes[m].readers)
}

// access records op me's use of [start, end) in treap t, calls add for every
// op it depends on, and returns the new treap.
func (x *segIndex) access(t int32, start, end int64, me int32, writes bool, add func(int32)) int32 {
	if n := &x.nodes[t]; n.left < 0 && n.right < 0 && n.start == start && n.end == end {
		x.visit(t, me, writes, add) // the common case: one segment, all of it
		if writes {
			n.writer, n.readers = me, n.readers[:0]
		}
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
	x.walk(m, func(s int32) { x.visit(s, me, writes, add) })
	if writes {
		x.walk(m, func(s int32) { x.free = append(x.free, s) })
		m = x.node(start, end, me, nil)
	}
	return x.merge(x.merge(l, m), r)
}

// visit adds the deps that segment s gives op me and, for a read, records it.
func (x *segIndex) visit(s int32, me int32, writes bool, add func(int32)) {
	n := &x.nodes[s]
	add(n.writer)
	x.work++
	if writes {
		x.work += int64(len(n.readers))
		for _, r := range n.readers {
			add(r)
		}
		return
	}
	if k := len(n.readers); k == 0 || n.readers[k-1] != me {
		n.readers = append(n.readers, me)
	}
}

// walk calls f on every node of t in order of start.
func (x *segIndex) walk(t int32, f func(int32)) {
	for t >= 0 {
		x.walk(x.nodes[t].left, f)
		f(t)
		t = x.nodes[t].right
	}
}
