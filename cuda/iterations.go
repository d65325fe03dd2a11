//go:build cgo

package cuda

import (
	"cmp"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
)

// Iterations under CUPTI. The ops of a conditional node's body are named
// by the nodes CUPTI gives their records (bodyNode, cupti.go). CUPTI
// 2025.3 on driver 580 gives some body records stale node ids once other
// graphs with the same kernels ran in the process (seen in the GPU tests:
// the loop's own kernel named by a node of an earlier graph); those
// records name no op of the run and are left out, so an op's iterations
// may then merge or go missing from the trace. Outputs never depend on it.
//
// A loop's body runs inside a conditional node, so its ops' records carry
// no iteration number; but a While's own kernels
// do mark them: dr_cond_enter runs before the node and dr_cond_next at the
// end of every iteration, after every op of the body (the body's streams
// are joined into its entry stream before it). So the records of the loop
// op itself, in start order, are the iterations' bounds: a body record
// that starts after k of them belongs to iteration k. A While whose body's
// last kernel sets its condition (condsetter.go) has no dr_cond_next: that
// kernel's records, its op's, bound the iterations as well.

// loopIndex says, by op slot (opSlot), which loop each body op runs in
// and which ops bound iterations.
type loopIndex struct {
	// of is the slot of the innermost While whose body holds the op, or
	// notInBody, or inNoLoop for a body op of branches only (one span per
	// run).
	of []int32
	// bounds marks the Whiles: their records bound their bodies'
	// iterations. A While inside a loop is both a body op and a bound.
	bounds []bool
	// cond is, for the op that sets a While's condition in its body's
	// last kernel, the While's slot: its records are the While's too;
	// notInBody for every other op.
	cond []int32
}

// setsCond notes that set's records are loop's too (nil loop: no
// longer); nothing for a nil set or index.
func (li *loopIndex) setsCond(set, loop *dag.Op) {
	if li == nil || set == nil || opSlot(set) >= len(li.cond) {
		return
	}
	li.cond[opSlot(set)] = notInBody
	if loop != nil {
		li.cond[opSlot(set)] = int32(opSlot(loop))
	}
}

const (
	notInBody = -1
	inNoLoop  = -2
)

// newLoopIndex indexes g's bodies; nil when g has none.
func newLoopIndex(g *dag.Graph) *loopIndex {
	if g == nil || len(g.Nested) == 0 {
		return nil
	}
	n := len(g.Ops) + len(g.Nested)
	li := &loopIndex{of: make([]int32, n), bounds: make([]bool, n), cond: make([]int32, n)}
	for i := range li.of {
		li.of[i], li.cond[i] = notInBody, notInBody
	}
	var walk func(ops []*dag.Op, loop int32)
	walk = func(ops []*dag.Op, loop int32) {
		for _, op := range ops {
			s := opSlot(op)
			if s < 0 || s >= n {
				continue
			}
			li.of[s] = loop
			inner := loop
			if inner == notInBody {
				inner = inNoLoop
			}
			if op.Kind.Info().Body == dag.Loop {
				li.bounds[s] = true
				inner = int32(s)
			}
			for _, b := range op.Bodies() {
				walk(b.Ops, inner)
			}
		}
	}
	walk(g.Ops, notInBody)
	return li
}

// withCondRecords appends to recs, for each record of an op that sets a
// While's condition, the same record as the While's: a bound of its
// iterations and part of its span, as dr_cond_next's records are. The
// op's own records then count themselves among the bounds before them:
// each still falls in an iteration of its own.
func (li *loopIndex) withCondRecords(recs []activityRecord) []activityRecord {
	if li == nil {
		return recs
	}
	for i, n := 0, len(recs); i < n; i++ {
		if r := recs[i]; r.Op >= 0 && r.Op < int64(len(li.cond)) && li.cond[r.Op] != notInBody {
			r.Op = int64(li.cond[r.Op])
			recs = append(recs, r)
		}
	}
	return recs
}

// iterExtent is one record of a body op: its replay (-1: eager), op, the
// loop it runs in (a slot, or inNoLoop), and its iteration once found.
type iterExtent struct {
	replay int64
	op     int
	loop   int32
	iter   int
	extent
}

// replayStart is when a replay's first record named by its launch began.
type replayStart struct {
	replay int64
	start  uint64
}

// findReplayStarts notes when each replay among recs began (its records
// that name their launch), by start.
func (c *cuptiTiming) findReplayStarts(recs []activityRecord, origin uint64) {
	c.replayStarts = c.replayStarts[:0]
	for _, r := range recs {
		if r.Replay < 0 || r.Start == 0 || r.Start < origin {
			continue
		}
		if n := len(c.replayStarts); n > 0 && c.replayStarts[n-1].replay == r.Replay {
			c.replayStarts[n-1].start = min(c.replayStarts[n-1].start, r.Start)
			continue
		}
		c.replayStarts = append(c.replayStarts, replayStart{r.Replay, r.Start})
	}
	slices.SortFunc(c.replayStarts, func(a, b replayStart) int {
		if d := cmp.Compare(a.replay, b.replay); d != 0 {
			return d
		}
		return cmp.Compare(a.start, b.start)
	})
	c.replayStarts = slices.CompactFunc(c.replayStarts, func(a, b replayStart) bool { return a.replay == b.replay })
	slices.SortFunc(c.replayStarts, func(a, b replayStart) int { return cmp.Compare(a.start, b.start) })
}

// replayAt is the replay a body record that began at start belongs to:
// the records of a conditional node's body carry no correlation, so no
// launch names them; replays of one session run one after another, so it
// is the last replay to have begun by then. -1 (eager) before any replay.
func (c *cuptiTiming) replayAt(start uint64) int64 {
	i, _ := slices.BinarySearchFunc(c.replayStarts, start+1, func(r replayStart, t uint64) int { return cmp.Compare(r.start, t) })
	if i == 0 {
		return -1
	}
	return c.replayStarts[i-1].replay
}

// iterationSpans calls f once per body op, run (replay or eager) and
// iteration with records among c.inBodies, from the iteration's first
// record's start to its last one's end; the bounds of each loop's
// iterations are its records among c.bounds.
func (c *cuptiTiming) iterationSpans(origin uint64, f func(replay, op, stream int, start, end time.Duration)) {
	if len(c.inBodies) == 0 {
		return
	}
	// A loop's bounds: its own records, by run and start.
	type bound struct {
		replay int64
		loop   int
		start  uint64
	}
	bounds := make([]bound, 0, len(c.bounds))
	for _, r := range c.bounds {
		bounds = append(bounds, bound{r.Replay, int(r.Op), r.Start})
	}
	cmpBound := func(a, b bound) int {
		if d := cmp.Compare(a.replay, b.replay); d != 0 {
			return d
		}
		if d := cmp.Compare(a.loop, b.loop); d != 0 {
			return d
		}
		return cmp.Compare(a.start, b.start)
	}
	slices.SortFunc(bounds, cmpBound)
	// The bounds of the run and loop of the record before: records come
	// run by run, so most share them.
	var group []bound
	for i := range c.inBodies {
		e := &c.inBodies[i]
		if e.loop < 0 {
			continue // no loop: one span per run
		}
		if len(group) == 0 || group[0].replay != e.replay || group[0].loop != int(e.loop) {
			lo, _ := slices.BinarySearchFunc(bounds, bound{e.replay, int(e.loop), 0}, cmpBound)
			hi := lo
			for hi < len(bounds) && bounds[hi].replay == e.replay && bounds[hi].loop == int(e.loop) {
				hi++
			}
			group = bounds[lo:hi]
		}
		// Bounds of this loop in this run that start no later than e.
		e.iter, _ = slices.BinarySearchFunc(group, e.start+1, func(b bound, t uint64) int { return cmp.Compare(b.start, t) })
	}
	c.sortInBodies()
	for i := 0; i < len(c.inBodies); {
		k := c.inBodies[i]
		e := k.extent
		for i++; i < len(c.inBodies) && c.inBodies[i].replay == k.replay && c.inBodies[i].op == k.op && c.inBodies[i].iter == k.iter; i++ {
			e.add(c.inBodies[i].start, c.inBodies[i].end)
		}
		f(int(k.replay), k.op, int(c.streams[k.op]), time.Duration(e.start-origin), time.Duration(e.end-origin))
	}
}

// sortInBodies orders c.inBodies by run, op and iteration: by run and
// op first, counted (a loop's body has few ops), each op's records then
// in the order they came, which is by start and so by iteration, sorted
// only where they are not; a comparison sort of every record took most of
// the reading of a long loop's spans (BenchmarkLoopSpans: 3.5-4.7 ms of
// 1,000 iterations of 11 kernels, 0.8 ms now).
func (c *cuptiTiming) sortInBodies() {
	type key struct {
		replay int64
		op     int
	}
	// Each record's bucket, by a table of ops per run: records come run
	// by run, so the last run's table serves most.
	nops := len(c.streams)
	tables := map[int64][]int32{}
	var keys []key
	var lastReplay int64
	var table []int32
	bucket := slices.Grow(c.bodyBuckets[:0], len(c.inBodies))[:len(c.inBodies)]
	for i, e := range c.inBodies {
		if table == nil || e.replay != lastReplay {
			lastReplay, table = e.replay, tables[e.replay]
			if table == nil {
				table = make([]int32, nops)
				for j := range table {
					table[j] = -1
				}
				tables[e.replay] = table
			}
		}
		if table[e.op] < 0 {
			table[e.op] = int32(len(keys))
			keys = append(keys, key{e.replay, e.op})
		}
		bucket[i] = table[e.op]
	}
	// The buckets in key order, each's first place.
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if d := cmp.Compare(keys[a].replay, keys[b].replay); d != 0 {
			return d
		}
		return cmp.Compare(keys[a].op, keys[b].op)
	})
	count := make([]int, len(keys))
	for _, k := range bucket {
		count[k]++
	}
	next, ends := make([]int, len(keys)), make([]int, 0, len(keys))
	at := 0
	for _, k := range order {
		next[k] = at
		at += count[k]
		ends = append(ends, at)
	}
	sorted := slices.Grow(c.sortedBodies[:0], len(c.inBodies))[:len(c.inBodies)]
	for i, e := range c.inBodies {
		sorted[next[bucket[i]]] = e
		next[bucket[i]]++
	}
	byIter := func(a, b iterExtent) int { return cmp.Compare(a.iter, b.iter) }
	from := 0
	for _, end := range ends {
		if b := sorted[from:end]; !slices.IsSortedFunc(b, byIter) {
			slices.SortFunc(b, byIter)
		}
		from = end
	}
	c.inBodies, c.sortedBodies, c.bodyBuckets = sorted, c.inBodies, bucket
}

// bodyNode names a node of a conditional node's body as replayed. The
// driver instantiates a graph as a clone of it and a clone of each body
// graph, one graph id after another, with a node clone callback for each
// of their nodes; but the body's nodes run as further places of the
// top clone (CUPTI's node ids hold the graph's id in the high 32 bits and
// the node's place in the low ones), with no callback. So a place beyond
// the top clone's own nodes (places: how many each clone has) is the same
// place in the body clones that follow it, in id order; the body clone's
// node is then named as any clone is. TestCUPTIBodyRecordsGPU and
// TestLoopIterationSpansGPU check this against the driver.
func bodyNode(id uint64, clones, places map[uint64]uint64, nodeOps map[uint64]int64) (uint64, int64, bool) {
	g, p := id>>32, id&0xffffffff
	n, ok := places[g]
	if !ok || p < n {
		return id, 0, false
	}
	p -= n
	for h := g + 1; ; h++ {
		m, ok := places[h]
		if !ok {
			return id, 0, false
		}
		if p < m {
			node := h<<32 | p
			for range 8 { // a clone of a clone, to the first
				orig, ok := clones[node]
				if !ok {
					break
				}
				node = orig
			}
			op, ok := nodeOps[node]
			return node, op, ok
		}
		p -= m
	}
}
