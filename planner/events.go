package planner

import (
	"cmp"
	"slices"

	"github.com/dagrun/dagrun/dag"
)

// clocks are vector clocks over streams: cur[s][t] = n says that stream s
// is ordered after the first n ops of stream t, through the waits it has
// made so far, directly or transitively. A dependency on an op of t at
// position p <= cur[s][t] needs no wait.
//
// To know what a wait on an op implies, the planner needs the clock of the
// op's stream as it was when the op ran. Rather than a clock per op, a
// stream's clock is copied only when it changes (after the waits of an op
// that waited), and each op keeps a reference to the copy in force when it
// ran. The copies live in fixed chunks, so that they are never moved.
type clocks struct {
	cur      [][]int32
	latest   []clockRef // per stream: its clock's latest copy
	chunks   [][]int32  // copies, each stored as its length and then its entries
	chunkLen int        // the usual capacity of a chunk
	room     []int32    // zeros for the clocks of streams to come, cut from base
	base     []int32
}

// clockRef locates a copied clock: chunk index << 32 | offset; noClock for
// a stream that has not waited yet.
type clockRef int64

const noClock clockRef = -1

// chunkShift sizes the chunks of int32 lists for a graph of n ops: small
// graphs get small chunks, large ones chunks of 64 Ki entries.
func chunkShift(n int) uint {
	shift := uint(6)
	for shift < 16 && 1<<shift < n {
		shift++
	}
	return shift
}

// reset empties c for another candidate, keeping its room.
func (c *clocks) reset() {
	c.cur, c.latest = c.cur[:0], c.latest[:0]
	clear(c.base)
	c.room = c.base
	if len(c.chunks) > 0 {
		c.chunks = append(c.chunks[:0], c.chunks[0][:0])
	}
}

func (c *clocks) addStream() {
	if c.cur == nil {
		// Room for a plan's few streams, and for each stream's clock of
		// them, cut from one allocation (grow makes more past 8).
		c.cur, c.latest, c.base = make([][]int32, 0, 8), make([]clockRef, 0, 8), make([]int32, 64)
		c.room = c.base
	}
	var v []int32
	if len(c.room) >= 8 {
		v, c.room = c.room[:0:8], c.room[8:]
	}
	c.cur = append(c.cur, v)
	c.latest = append(c.latest, noClock)
}

// covers reports whether stream s is ordered after the op at position pos
// of stream t.
func (c *clocks) covers(s, t, pos int32) bool {
	v := c.cur[s]
	return int(t) < len(v) && v[t] >= pos
}

// join makes stream s wait for the op at position pos of stream t, which
// ran under t's clock copy ref: s becomes ordered after that op and after
// everything t was ordered after when it ran.
func (c *clocks) join(s, t, pos int32, ref clockRef) {
	if ref != noClock {
		chunk := c.chunks[ref>>32]
		off := int(ref & (1<<32 - 1))
		n := int(chunk[off])
		c.merge(s, chunk[off+1:off+1+n])
	}
	c.grow(s, int(t)+1)
	c.cur[s][t] = max(c.cur[s][t], pos)
}

func (c *clocks) merge(s int32, v []int32) {
	c.grow(s, len(v))
	cur := c.cur[s]
	for u, x := range v {
		if x > cur[u] {
			cur[u] = x
		}
	}
}

func (c *clocks) grow(s int32, n int) {
	v := c.cur[s]
	switch {
	case len(v) >= n:
	case cap(v) >= n:
		c.cur[s] = v[:n] // the entries beyond len are zero: nothing wrote them
	default:
		// Room for a few streams more: a plan has a few.
		w := make([]int32, n, max(n, 8))
		copy(w, v)
		c.cur[s] = w
	}
}

// copyClock stores a copy of s's clock as its latest.
func (c *clocks) copyClock(s int32) {
	v := c.cur[s]
	last := len(c.chunks) - 1
	if last < 0 || cap(c.chunks[last])-len(c.chunks[last]) < len(v)+1 {
		c.chunks = append(c.chunks, make([]int32, 0, max(c.chunkLen, len(v)+1)))
		last++
	}
	chunk := c.chunks[last]
	c.latest[s] = clockRef(last)<<32 | clockRef(len(chunk))
	chunk = append(chunk, int32(len(v)))
	c.chunks[last] = append(chunk, v...)
}

// addWaits decides the waits op i, placed on stream s, needs: one for each
// dependency on another stream that s is not yet ordered after. Waiting for
// the latest placed producer first lets its clock cover earlier ones: an op
// can only be ordered after ops placed before it, so this leaves no wait that
// another wait of the same op implies.
func (a *assigner) addWaits(i int32, op *dag.Op, s int32) {
	if a.scratch == nil {
		a.scratch = make([]int32, 0, 8)
	}
	need := a.scratch[:0]
	for _, dep := range op.Deps {
		t := a.opStream[dep]
		if t == s {
			continue
		}
		a.crossEdges++
		if !a.clocks.covers(s, t, a.opPos[dep]) {
			need = append(need, dep)
		}
	}
	if len(need) > 0 {
		slices.SortFunc(need, func(x, y int32) int { return cmp.Compare(a.rank[x], a.rank[y]) })
		for k := len(need) - 1; k >= 0; k-- {
			dep := need[k]
			t, pos := a.opStream[dep], a.opPos[dep]
			if a.clocks.covers(s, t, pos) {
				continue
			}
			a.clocks.join(s, t, pos, a.opClock[dep])
			a.waitOps.append(dep)
			a.eventOf[dep] = 0 // numbered in layOut
		}
		a.clocks.copyClock(s)
	}
	a.opClock[i] = a.clocks.latest[s]
	a.scratch = need
	a.waitOff[a.rank[i]+1] = int32(a.waitOps.len())
}

// layOut numbers the events in the order of their ops' IDs and writes the
// global submission order: for each op, by estimated start time (then
// placement order),
// its waits, its run, and its record if anything waits for it. Submitting
// by start time rather than declaration order matters on a GPU: chains
// declared one after another are then fed to their streams side by side,
// so no stream starves while the host is still submitting another's ops.
// The order is valid because an op starts no earlier than its producers
// finish (ties between zero-cost ops fall back to placement order, which
// respects dependencies and stream order), and each stream's ops start in
// the order it runs them.
func (a *assigner) layOut(p *Plan) {
	events := int32(0)
	for i, e := range a.eventOf {
		if e >= 0 {
			a.eventOf[i] = events
			events++
		}
	}
	p.Events = int(events)
	steps := make([]Step, 0, len(a.ops)+a.waitOps.len()+int(events))
	// Start from the placement order: list scheduling places ops by
	// their start, give or take a wait's cost, so the sort has little to do.
	if len(a.order) != len(a.ops) {
		a.order = make([]int32, len(a.ops))
	}
	order := a.order
	for i, r := range a.rank {
		order[r] = int32(i)
	}
	byStart := func(x, y int32) int {
		if c := cmp.Compare(a.start[x], a.start[y]); c != 0 {
			return c
		}
		return cmp.Compare(a.rank[x], a.rank[y])
	}
	switch {
	case len(order) <= 64:
		// Insertion sort: for an order nearly sorted already, quicker
		// than a sort that calls byStart. The order is total (ranks
		// differ), so every sort makes the same.
		for i := 1; i < len(order); i++ {
			x := order[i]
			j := i
			for ; j > 0 && byStart(order[j-1], x) > 0; j-- {
				order[j] = order[j-1]
			}
			order[j] = x
		}
	case !slices.IsSortedFunc(order, byStart):
		slices.SortFunc(order, byStart)
	}
	for _, i := range order {
		s := a.opStream[i]
		for w, r := a.waitOff[a.rank[i]], a.rank[i]; w < a.waitOff[r+1]; w++ {
			steps = append(steps, Step{Kind: Wait, Stream: s, Op: i, Event: a.eventOf[a.waitOps.at(int(w))]})
		}
		steps = append(steps, Step{Kind: Run, Stream: s, Op: i, Event: -1})
		if e := a.eventOf[i]; e >= 0 {
			steps = append(steps, Step{Kind: Record, Stream: s, Op: i, Event: e})
		}
	}
	p.Steps = steps
}

// int32List is an append-only list of int32 in chunks of 1<<shift: growing
// it never copies, which matters for lists of millions.
type int32List struct {
	chunks [][]int32
	n      int
	shift  uint
}

func (l *int32List) append(x int32) {
	size := 1 << l.shift
	if l.n&(size-1) == 0 && l.n>>l.shift == len(l.chunks) {
		l.chunks = append(l.chunks, make([]int32, size))
	}
	l.chunks[l.n>>l.shift][l.n&(size-1)] = x
	l.n++
}

// reset empties l, keeping its chunks.
func (l *int32List) reset() { l.n = 0 }

func (l *int32List) at(i int) int32 { return l.chunks[i>>l.shift][i&(1<<l.shift-1)] }

func (l *int32List) len() int { return l.n }
