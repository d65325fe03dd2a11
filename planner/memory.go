package planner

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/dagrun/dagrun/dag"
)

// The memories of host placements, in MemoryUse.Device and
// Temporary.Device; devices are their ordinals.
const (
	PinnedMemory   = -1 // page-locked host memory
	PageableMemory = -2 // ordinary host memory
)

// ArenaAlign is the alignment of every temporary's offset in its arena and
// the unit its size is rounded up to: what cuMemAlloc guarantees, so a
// temporary in an arena is as aligned as one of its own.
const ArenaAlign = 256

// Memory is what a plan needs of each memory: the persistent buffers, the
// temporaries' peak, and one arena per memory into which the temporaries
// are packed.
//
// Two temporaries share bytes of an arena only when the plan orders every
// use of one before every use of the other through its streams and events
// (happens-before, the relation Verify checks), never through timing: a
// temporary's Alloc and Free ops then need do nothing at run time.
type Memory struct {
	Memories    []MemoryUse // by Device, host memories first
	Temporaries []Temporary // in buffer ID order
}

// MemoryUse is what a plan needs of one memory.
type MemoryUse struct {
	Device     int   // a device ordinal, PinnedMemory or PageableMemory
	Persistent int64 // the bytes of the persistent buffers placed there
	// TemporaryPeak is the most bytes of temporaries (each rounded up to
	// ArenaAlign) that the plan lets be live at once, on any timing: the
	// heaviest set of temporaries no two of which the plan orders. No
	// arena can be smaller.
	TemporaryPeak int64
	// Peak are the temporaries of that set (buffer IDs, by ID), and
	// PeakOps the first op that uses each: work that runs while the peak
	// is live.
	Peak    []int
	PeakOps []int32
	// ArenaBytes is the size of the arena the temporaries are packed into.
	ArenaBytes int64
	// TemporaryBytes is the sum of the temporaries' rounded sizes: what
	// giving each its own bytes would need.
	TemporaryBytes int64
	Temporaries    int // how many temporaries live there
}

// Bytes is the memory's need in all: persistent buffers and the arena.
func (m MemoryUse) Bytes() int64 { return dag.AddSat(m.Persistent, m.ArenaBytes) }

// Temporary is a temporary buffer's place in its memory's arena.
type Temporary struct {
	Buffer int   // the buffer's ID
	Device int   // its memory: a device ordinal, PinnedMemory or PageableMemory
	Bytes  int64 // its size rounded up to ArenaAlign
	Offset int64 // where it starts in the arena, a multiple of ArenaAlign
	// Alloc and Free are the ops that allocate and free it (-1 for none:
	// a temporary live at the end has no Free).
	Alloc, Free int32
}

// MemoryOf returns the memory p needs: each memory's persistent bytes, the
// temporaries' peak and their arena. New sets Plan.Memory to it.
//
// The packing is greedy, as TFLite's arena planner and XLA's heap
// simulator do it: temporaries are placed one at a time, each at the
// lowest-waste gap (best fit) among the temporaries already placed that the
// plan does not order against it, in three orders (largest first, longest
// lived first, first used first); the smallest arena wins. It takes
// O(T²·S) time for T temporaries of a memory and S streams, plus a maximum
// flow for the peak.
func MemoryOf(p *Plan) *Memory {
	if p == nil || p.Graph == nil {
		return nil
	}
	g := p.Graph
	mem := &Memory{}
	uses := map[int]*MemoryUse{}
	use := func(dev int) *MemoryUse {
		u := uses[dev]
		if u == nil {
			u = &MemoryUse{Device: dev}
			uses[dev] = u
		}
		return u
	}
	lives := collectLives(p)
	for _, b := range g.Buffers {
		if b == nil {
			continue
		}
		if !b.Temporary {
			u := use(memoryOf(b))
			u.Persistent = dag.AddSat(u.Persistent, b.Size)
		}
	}
	byMemory := map[int][]*life{}
	for _, l := range lives {
		byMemory[l.t.Device] = append(byMemory[l.t.Device], l)
	}
	for dev, ls := range byMemory {
		u := use(dev)
		u.Temporaries = len(ls)
		for _, l := range ls {
			u.TemporaryBytes = dag.AddSat(u.TemporaryBytes, l.t.Bytes)
		}
		u.TemporaryPeak, u.Peak = peakOf(ls)
		u.ArenaBytes = packArena(ls, u.TemporaryPeak)
		for _, id := range u.Peak {
			for _, l := range ls {
				if l.t.Buffer == id {
					u.PeakOps = append(u.PeakOps, l.firstUse)
				}
			}
		}
	}
	for _, l := range lives {
		mem.Temporaries = append(mem.Temporaries, *l.t)
	}
	for _, u := range uses {
		mem.Memories = append(mem.Memories, *u)
	}
	slices.SortFunc(mem.Memories, func(a, b MemoryUse) int { return cmp.Compare(a.Device, b.Device) })
	return mem
}

// memoryOf is the memory buffer b lives in.
func memoryOf(b *dag.Buffer) int {
	switch b.Placement {
	case dag.Pinned:
		return PinnedMemory
	case dag.Pageable:
		return PageableMemory
	}
	return b.Device
}

// roundUp rounds n up to ArenaAlign, saturating.
func roundUp(n int64) int64 {
	if n > math.MaxInt64-ArenaAlign {
		return math.MaxInt64 &^ (ArenaAlign - 1)
	}
	return (n + ArenaAlign - 1) &^ (ArenaAlign - 1)
}

// life is a temporary and where its uses are in the plan's happens-before
// order.
type life struct {
	t *Temporary
	// last[s] is the place among stream s's runs (from 1) of the last use
	// on s, 0 for none; first[s] is the fewest runs of stream s that every
	// use is ordered after (a vector clock meet over the uses, each clock
	// taken just before the use runs).
	last, first []int32
	firstUse    int32 // the use submitted first
	start, end  int   // the steps of the first and last use, for orderings
}

// before reports whether the plan orders every use of l before every use of
// m.
func (l *life) before(m *life) bool {
	for s, n := range l.last {
		if n > m.first[s] {
			return false
		}
	}
	return true
}

// collectLives replays p's steps with a vector clock per stream and finds
// each temporary's uses: the ops that access it other than its Alloc and
// Free, or those two where nothing else does (in an arena they are the only
// ops that name it, and do nothing).
func collectLives(p *Plan) []*life {
	g := p.Graph
	ns := len(p.Streams)
	var lives []*life
	byBuf := make([]*life, len(g.Buffers))
	used := make([]bool, len(g.Buffers))
	for _, op := range g.Ops {
		if op == nil {
			continue
		}
		for _, a := range op.Access {
			if b := a.Buf; b != nil && b.Temporary && b.ID >= 0 && b.ID < len(g.Buffers) {
				if byBuf[b.ID] == nil {
					t := &Temporary{Buffer: b.ID, Device: memoryOf(b), Bytes: roundUp(b.Size), Alloc: -1, Free: -1}
					l := &life{t: t, last: make([]int32, ns), first: make([]int32, ns), firstUse: -1, start: -1}
					for s := range l.first {
						l.first[s] = math.MaxInt32
					}
					byBuf[b.ID] = l
				}
				switch op.Kind.Info().Lifetime {
				case dag.Allocates:
					byBuf[b.ID].t.Alloc = int32(op.ID)
				case dag.Frees:
					byBuf[b.ID].t.Free = int32(op.ID)
				default:
					used[b.ID] = true
				}
			}
		}
	}
	for _, l := range byBuf {
		if l != nil {
			lives = append(lives, l)
		}
	}
	isUse := func(op *dag.Op, l *life) bool {
		return used[l.t.Buffer] != (op.Kind.Info().Lifetime != dag.NoLifetime)
	}
	clock := make([]int32, ns*ns)
	events := make([][]int32, p.Events)
	for i, st := range p.Steps {
		s := int(st.Stream)
		if s < 0 || s >= ns {
			continue
		}
		mine := clock[s*ns : (s+1)*ns]
		switch st.Kind {
		case Record:
			if st.Event >= 0 && int(st.Event) < len(events) {
				events[st.Event] = slices.Clone(mine)
			}
		case Wait:
			if st.Event >= 0 && int(st.Event) < len(events) {
				for t, c := range events[st.Event] {
					mine[t] = max(mine[t], c)
				}
			}
		case Run:
			if st.Op < 0 || int(st.Op) >= len(g.Ops) {
				continue
			}
			op := g.Ops[st.Op]
			for j, a := range op.Access {
				if a.Buf == nil || !a.Buf.Temporary || slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == a.Buf }) {
					continue
				}
				l := byBuf[a.Buf.ID]
				if !isUse(op, l) {
					continue
				}
				for t, c := range mine {
					l.first[t] = min(l.first[t], c)
				}
				l.last[s] = mine[s] + 1
				if l.start < 0 {
					l.start, l.firstUse = i, st.Op
				}
				l.end = i
			}
			mine[s]++
		}
	}
	return lives
}

// packArena gives each temporary of ls (all of one memory) an offset and
// returns the arena's size. It tries the greedy packing in a few orders,
// and then, while the arena is above peak (no arena can be smaller) and the
// work stays bounded, in shuffled orders: the smallest arena wins.
func packArena(ls []*life, peak int64) int64 {
	n := len(ls)
	// conflicts[i]: the temporaries that may be live with i.
	conflicts := make([][]int32, n)
	pairs := 0
	for i := range ls {
		for j := i + 1; j < n; j++ {
			if !ls[i].before(ls[j]) && !ls[j].before(ls[i]) {
				conflicts[i] = append(conflicts[i], int32(j))
				conflicts[j] = append(conflicts[j], int32(i))
				pairs++
			}
		}
	}
	load := make([]int64, n) // the bytes that may be live with each
	for i, cs := range conflicts {
		load[i] = ls[i].t.Bytes
		for _, j := range cs {
			load[i] = dag.AddSat(load[i], ls[j].t.Bytes)
		}
	}
	bySize := func(a, b int) int {
		return cmp.Or(cmp.Compare(ls[b].t.Bytes, ls[a].t.Bytes), cmp.Compare(ls[a].start, ls[b].start), cmp.Compare(a, b))
	}
	orders := []func(a, b int) int{
		bySize,
		func(a, b int) int { return cmp.Or(cmp.Compare(load[b], load[a]), bySize(a, b)) },
		func(a, b int) int {
			return cmp.Or(cmp.Compare(ls[b].end-ls[b].start, ls[a].end-ls[a].start), bySize(a, b))
		},
		func(a, b int) int { return cmp.Or(cmp.Compare(ls[a].start, ls[b].start), bySize(a, b)) },
	}
	var best []int64
	bestSize := int64(-1)
	try := func(order []int) {
		for _, how := range []fit{{best: true}, {}, {best: true, high: true, height: peak}} {
			offsets, size := greedyFit(ls, conflicts, order, how)
			if bestSize < 0 || size < bestSize {
				best, bestSize = offsets, size
			}
		}
	}
	order := make([]int, n)
	for _, by := range orders {
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, by)
		try(order)
	}
	// Shuffles of the largest-first order: swaps of neighbours keep big
	// temporaries early but let the packing escape a bad tie.
	r := rand.New(rand.NewPCG(uint64(n), uint64(pairs)))
	for range min(maxShuffles, maxPackWork/(n+2*pairs+1)) {
		if bestSize <= peak {
			break
		}
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, bySize)
		for k := range n - 1 {
			if r.IntN(3) == 0 {
				order[k], order[k+1] = order[k+1], order[k]
			}
		}
		try(order)
	}
	for i, l := range ls {
		l.t.Offset = best[i]
	}
	return max(bestSize, 0)
}

// The packer's bounds on the shuffled orders it tries.
const (
	maxShuffles = 64
	maxPackWork = 1 << 22 // temporaries plus conflicts, summed over the shuffles
)

// fit is how greedyFit chooses among the gaps that hold a temporary.
type fit struct {
	best bool // the smallest gap (best fit), or else the lowest (first fit)
	// high places it at the top of its gap, and counts the room between
	// the temporaries below and height as a gap: bottoms and tops of a
	// chain then interleave, as in an optimal packing of a path.
	high   bool
	height int64
}

// greedyFit places the temporaries in order, each in a gap that holds it
// between the conflicting temporaries placed before it, or above them all.
func greedyFit(ls []*life, conflicts [][]int32, order []int, how fit) ([]int64, int64) {
	offsets := make([]int64, len(ls))
	placed := make([]bool, len(ls))
	type span struct{ lo, hi int64 }
	var busy []span
	var size int64
	for _, i := range order {
		busy = busy[:0]
		for _, j := range conflicts[i] {
			if placed[j] {
				busy = append(busy, span{offsets[j], dag.AddSat(offsets[j], ls[j].t.Bytes)})
			}
		}
		slices.SortFunc(busy, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
		need := ls[i].t.Bytes
		at, gap := int64(-1), int64(math.MaxInt64)
		var top int64
		consider := func(lo, hi int64) bool {
			g := hi - lo
			if g < need || g >= gap {
				return false
			}
			at, gap = lo, g
			if how.high {
				at = hi - need // sizes are multiples of ArenaAlign, and so is hi
			}
			return !how.best
		}
		for _, b := range busy {
			if consider(top, b.lo) {
				break
			}
			top = max(top, b.hi)
		}
		if at < 0 && how.high && how.height > top {
			consider(top, how.height)
		}
		if at < 0 {
			at = top
		}
		offsets[i], placed[i] = at, true
		size = max(size, dag.AddSat(at, need))
	}
	return offsets, size
}

// peakOf returns the heaviest set of temporaries of ls no two of which are
// ordered, and its weight: by Dilworth's theorem, weighted, the weight of
// all minus a maximum flow from each temporary to the ones it is ordered
// before (Fulkerson's reduction to bipartite matching).
func peakOf(ls []*life) (int64, []int) {
	n := len(ls)
	if n == 0 {
		return 0, nil
	}
	f := newFlow(2*n + 2)
	src, sink := 2*n, 2*n+1
	for i, l := range ls {
		f.edge(src, i, l.t.Bytes)
		f.edge(n+i, sink, l.t.Bytes)
		for j, m := range ls {
			if i != j && l.before(m) {
				f.edge(i, n+j, math.MaxInt64)
			}
		}
	}
	f.max(src, sink)
	reach := f.reachable(src)
	var peak []int
	var weight int64
	for i, l := range ls {
		if reach[i] && !reach[n+i] {
			peak = append(peak, l.t.Buffer)
			weight = dag.AddSat(weight, l.t.Bytes)
		}
	}
	slices.Sort(peak)
	return weight, peak
}
