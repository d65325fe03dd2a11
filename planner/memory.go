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
// lowest-waste gap (best fit) or the lowest gap (first fit) among the
// temporaries already placed that the plan does not order against it, in
// four orders (largest first, most bytes live beside it first, longest
// lived first, first used first); then, while the arena is above the peak,
// a local search moves the temporaries that end above the peak earlier in
// the order of the best packing so far. The smallest arena wins. The
// temporaries that may be live together are found in one replay of the
// plan's steps, which retires a temporary once every stream that will use
// temporaries again has waited for its last use; the peak is a maximum flow
// over that order. The work is about linear in the temporaries and the
// pairs of them that the plan leaves unordered, and the local search is
// bounded (maxPackWork).
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
	temps := 0
	for _, b := range g.Buffers {
		if b == nil {
			continue
		}
		if b.Temporary {
			temps++
		} else {
			u := use(memoryOf(b))
			u.Persistent = dag.AddSat(u.Persistent, b.Size)
		}
	}
	set := collectOf(p, temps)
	lives := set.lives
	byMemory := map[int][]int32{}
	var devs []int
	for i, l := range lives {
		if _, ok := byMemory[l.t.Device]; !ok {
			devs = append(devs, l.t.Device)
		}
		byMemory[l.t.Device] = append(byMemory[l.t.Device], int32(i))
	}
	for _, dev := range devs {
		o := set.order(byMemory[dev])
		ls := o.lives
		u := use(dev)
		u.Temporaries = len(ls)
		for _, l := range ls {
			u.TemporaryBytes = dag.AddSat(u.TemporaryBytes, l.t.Bytes)
		}
		var peak []int32
		u.TemporaryPeak, peak = peakOf(o)
		u.ArenaBytes = packArena(ls, o.conflicts, u.TemporaryPeak)
		for _, i := range peak {
			u.Peak = append(u.Peak, ls[i].t.Buffer)
			u.PeakOps = append(u.PeakOps, ls[i].firstUse)
		}
	}
	if len(lives) > 0 {
		mem.Temporaries = make([]Temporary, len(lives))
		for i, l := range lives {
			mem.Temporaries[i] = *l.t
		}
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
	on          []int32 // the streams s with last[s] > 0
	firstUse    int32   // the use submitted first
	start, end  int     // the steps of the first and last use, for orderings
	left        int32   // while collecting: the steps using it not replayed yet
}

// before reports whether the plan orders every use of l before every use of
// m.
func (l *life) before(m *life) bool {
	for _, s := range l.on {
		if l.last[s] > m.first[s] {
			return false
		}
	}
	return true
}

// lifeEvent is a temporary's first use (start) or its retirement, in the
// order collect met them. Once retired, a temporary is ordered before every
// temporary that starts after it; the retirements between two starts form
// one batch.
type lifeEvent struct {
	life   int32
	retire bool
}

// lifeSet is the temporaries of a plan and the events of its replay.
type lifeSet struct {
	lives []*life
	log   []lifeEvent
	// vecs holds the lives' vectors, last then first, of ns streams each:
	// life x's are vecs[2*x*ns:(2*x+2)*ns].
	vecs []int32
	ns   int
}

// collectLives returns the temporaries of p and their uses (collect).
func collectLives(p *Plan) []*life { return collect(p).lives }

// collect replays p's steps with a vector clock per stream and finds each
// temporary's uses: the ops that access it other than its Alloc and Free,
// or those two where nothing else does (in an arena they are the only ops
// that name it, and do nothing). On the way it retires the temporaries
// whose uses are all over and that every stream still to use a temporary
// has waited for: the meet of those streams' clocks (the frontier) is past
// their last uses, so the plan orders them before every later use.
func collect(p *Plan) *lifeSet {
	temps := 0
	for _, b := range p.Graph.Buffers {
		if b != nil && b.Temporary {
			temps++
		}
	}
	return collectOf(p, temps)
}

// collectOf is collect of a plan whose graph has temps temporaries.
func collectOf(p *Plan, temps int) *lifeSet {
	g := p.Graph
	ns := len(p.Streams)
	set := &lifeSet{}
	byBuf := make([]int32, len(g.Buffers))
	for i := range byBuf {
		byBuf[i] = -1
	}
	// The lives and their temporaries, in slabs.
	tSlab, lSlab := make([]Temporary, 0, temps), make([]life, 0, temps)
	// Each op's accesses of temporaries (once each), whether the op is an
	// Alloc or Free or not (plain), in one pass over the ops; used says
	// which lives a plain op names.
	type access struct {
		life  int32
		plain bool
	}
	accesses := make([]access, 0, len(g.Ops)+temps) // about one an op in graphs of temporaries
	accessStart := make([]int32, len(g.Ops)+1)
	used := make([]bool, 0, temps)
	set.lives = make([]*life, 0, temps)
	set.log = make([]lifeEvent, 0, 2*temps) // a start and a retirement each
	// Each kind's lifetime (kinds are uint8s), at hand.
	var lifetimes [256]dag.Lifetime
	for k := range lifetimes {
		lifetimes[k] = dag.OpKind(k).Info().Lifetime
	}
	for i, op := range g.Ops {
		accessStart[i] = int32(len(accesses))
		if op == nil {
			continue
		}
		lifetime := lifetimes[op.Kind]
		for j, a := range op.Access {
			if b := a.Buf; b != nil && b.Temporary && b.ID >= 0 && b.ID < len(g.Buffers) {
				if byBuf[b.ID] < 0 {
					if len(lSlab) == cap(lSlab) {
						tSlab, lSlab = make([]Temporary, 0, 64), make([]life, 0, 64)
					}
					tSlab = append(tSlab, Temporary{Buffer: b.ID, Device: memoryOf(b), Bytes: roundUp(b.Size), Alloc: -1, Free: -1})
					lSlab = append(lSlab, life{t: &tSlab[len(tSlab)-1], firstUse: -1, start: -1})
					byBuf[b.ID] = int32(len(set.lives))
					set.lives = append(set.lives, &lSlab[len(lSlab)-1])
					used = append(used, false)
				}
				x := byBuf[b.ID]
				switch lifetime {
				case dag.Allocates:
					set.lives[x].t.Alloc = int32(op.ID)
				case dag.Frees:
					set.lives[x].t.Free = int32(op.ID)
				default:
					used[x] = true
				}
				if !slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == b }) {
					accesses = append(accesses, access{x, lifetime == dag.NoLifetime})
				}
			}
		}
	}
	accessStart[len(g.Ops)] = int32(len(accesses))
	lives := set.lives
	if len(lives) == 0 {
		return set
	}
	// Vectors of all lives in two arrays, their streams in a third.
	vecs := make([]int32, 2*ns*len(lives))
	set.vecs, set.ns = vecs, ns
	ons := make([]int32, ns*len(lives))
	for i, l := range lives {
		l.last = vecs[2*i*ns : (2*i+1)*ns : (2*i+1)*ns]
		l.first = vecs[(2*i+1)*ns : (2*i+2)*ns : (2*i+2)*ns]
		l.on = ons[i*ns : i*ns : (i+1)*ns]
		for s := range l.first {
			l.first[s] = math.MaxInt32
		}
	}
	// opUses lists, by op, the temporaries its run uses (once each): those
	// it names, if plain, and those only Allocs and Frees name, if not.
	opStart := make([]int32, len(g.Ops)+1)
	opUses := make([]int32, 0, len(accesses))
	for i := range g.Ops {
		opStart[i] = int32(len(opUses))
		for _, a := range accesses[accessStart[i]:accessStart[i+1]] {
			if used[a.life] == a.plain {
				opUses = append(opUses, a.life)
			}
		}
	}
	opStart[len(g.Ops)] = int32(len(opUses))
	usesOf := func(op int32) []int32 { return opUses[opStart[op]:opStart[op+1]] }
	// What is left to replay: each life's using steps, each stream's steps
	// that use a temporary.
	remaining := make([]int32, ns)
	valid := func(st Step) bool {
		return st.Kind == Run && st.Stream >= 0 && int(st.Stream) < ns && st.Op >= 0 && int(st.Op) < len(g.Ops)
	}
	for _, st := range p.Steps {
		if valid(st) {
			if us := usesOf(st.Op); len(us) > 0 {
				remaining[st.Stream]++
				for _, x := range us {
					lives[x].left++
				}
			}
		}
	}
	clock := make([]int32, ns*ns)
	// events[e*ns+t]: event e's clock when recorded, zeros (ordering
	// nothing) until it is.
	events := make([]int32, max(p.Events, 0)*ns)
	r := &retirer{frontier: make([]int32, ns), seen: make([]int32, ns)}
	for i, st := range p.Steps {
		s := int(st.Stream)
		if s < 0 || s >= ns {
			continue
		}
		mine := clock[s*ns : (s+1)*ns]
		switch st.Kind {
		case Record:
			if st.Event >= 0 && int(st.Event) < p.Events {
				copy(events[int(st.Event)*ns:], mine)
			}
		case Wait:
			if st.Event >= 0 && int(st.Event) < p.Events {
				for t, c := range events[int(st.Event)*ns : (int(st.Event)+1)*ns] {
					mine[t] = max(mine[t], c)
				}
			}
		case Run:
			if !valid(st) {
				continue
			}
			us := usesOf(st.Op)
			if len(us) == 0 {
				mine[s]++
				continue
			}
			if len(r.pending) > r.checked && slices.ContainsFunc(us, func(x int32) bool { return lives[x].start < 0 }) {
				r.retire(set, clock, remaining)
			}
			for _, x := range us {
				l := lives[x]
				for t, c := range mine {
					l.first[t] = min(l.first[t], c)
				}
				if l.last[s] == 0 {
					l.on = append(l.on, int32(s))
				}
				l.last[s] = mine[s] + 1
				if l.start < 0 {
					l.start, l.firstUse = i, st.Op
					set.log = append(set.log, lifeEvent{life: x})
				}
				l.end = i
				if l.left--; l.left == 0 {
					r.pending = append(r.pending, x)
				}
			}
			remaining[s]--
			mine[s]++
		}
	}
	return set
}

// retirer retires the temporaries whose uses are over once the frontier
// passes them: it looks before each temporary's first use that follows the
// end of another's uses.
type retirer struct {
	pending []int32 // lives whose uses are over, not retired yet
	// pending[:checked] did not pass seen, the frontier of the last look;
	// the frontier only grows, so they need a look only once it does.
	checked        int
	frontier, seen []int32
}

// retire logs the lives of pending that the frontier (the meet of the
// clocks of the streams with temporaries still to use) has passed, and
// keeps the others.
func (r *retirer) retire(set *lifeSet, clock, remaining []int32) {
	ns := len(remaining)
	have := false
	frontier := r.frontier
	for t := range ns {
		if remaining[t] == 0 {
			continue
		}
		row := clock[t*ns : (t+1)*ns]
		if !have {
			copy(frontier, row)
			have = true
			continue
		}
		for k, c := range row {
			frontier[k] = min(frontier[k], c)
		}
	}
	if !have {
		return
	}
	from := 0
	if slices.Equal(frontier, r.seen) {
		from = r.checked
	}
	copy(r.seen, frontier)
	kept := r.pending[:from]
	for _, x := range r.pending[from:] {
		l := set.lives[x]
		passed := true
		for _, s := range l.on {
			if l.last[s] > frontier[s] {
				passed = false
				break
			}
		}
		if passed {
			set.log = append(set.log, lifeEvent{life: x, retire: true})
		} else {
			kept = append(kept, x)
		}
	}
	r.pending, r.checked = kept, len(kept)
}

// lifeOrder is the temporaries of one memory and how the plan orders
// them: the pairs it leaves unordered (conflicts), and a DAG whose paths
// join exactly the ordered pairs: direct arcs between ordered pairs that
// both lived at once in the replay, and for the rest, chains through
// barriers (one per batch of retirements).
type lifeOrder struct {
	lives     []*life
	conflicts [][]int32
	byStart   []int32 // the lives with uses, in the order they started in the replay
	// The direct arcs, by the later life: byStart[k]'s are from each
	// byStart[r] for r of direct[directEnd[k-1]:directEnd[k]] (before it,
	// both unretired when it started). Those implied by two others are
	// left out.
	direct, directEnd []int32
	retiredAt         []int32 // the barrier each life retired into, -1 for none
	startsAt          []int32 // the last barrier before each life started, -1 for none
	barriers          int
}

// order gathers the lifeOrder of the lives members (of one memory) of
// set.
func (set *lifeSet) order(members []int32) *lifeOrder {
	n := len(members)
	o := &lifeOrder{lives: make([]*life, n), conflicts: make([][]int32, n), retiredAt: make([]int32, n), startsAt: make([]int32, n),
		byStart: make([]int32, 0, n), directEnd: make([]int32, 0, n)}
	local := make([]int32, len(set.lives)) // by life of set, its place in o, -1 for none
	for i := range local {
		local[i] = -1
	}
	for i, x := range members {
		o.lives[i] = set.lives[x]
		local[x] = int32(i)
		o.retiredAt[i], o.startsAt[i] = -1, -1
	}
	// The work goes by rank, the place in the order the lives started:
	// the lives alive at once are near each other there.
	for _, ev := range set.log {
		if m := local[ev.life]; m >= 0 && !ev.retire {
			o.byStart = append(o.byStart, m)
		}
	}
	rank := make([]int32, n)
	for r, m := range o.byStart {
		rank[m] = int32(r)
	}
	// The vectors by rank, last then first: a is before m when a's last
	// run on every stream (0 for none) is within m's first.
	ns := set.ns
	vecs := make([]int32, 2*ns*len(o.byStart))
	for r, m := range o.byStart {
		x := members[m]
		copy(vecs[2*r*ns:(2*r+2)*ns], set.vecs[2*int(x)*ns:(2*int(x)+2)*ns])
	}
	before := func(a, m int32) bool {
		last, first := vecs[2*int(a)*ns:(2*int(a)+1)*ns], vecs[(2*int(m)+1)*ns:(2*int(m)+2)*ns]
		first = first[:len(last)]
		var under int32 // negative when a run is not within m's first (both in [0, MaxInt32]), without branches
		for s, c := range last {
			under |= first[s] - c
		}
		return under >= 0
	}
	var active []int32 // by rank
	// The conflicts of the life of rank r with lives started before it
	// (by rank): earlier[earlierEnd[r-1]:earlierEnd[r]], in the order
	// found.
	var earlier []int32
	earlierEnd := make([]int32, 0, n)
	degree := make([]int32, len(o.byStart))
	dead := 0
	// mark is -1 for the retired lives, r+1 for those with a direct arc
	// to one with a direct arc to r.
	mark := make([]int32, len(o.byStart))
	inBatch := false
	for _, ev := range set.log {
		m := local[ev.life]
		if m < 0 {
			continue
		}
		if ev.retire {
			if !inBatch {
				o.barriers++
				inBatch = true
			}
			o.retiredAt[m] = int32(o.barriers - 1)
			mark[rank[m]] = -1
			dead++
			continue
		}
		inBatch = false
		o.startsAt[m] = int32(o.barriers - 1)
		r := rank[m]
		if dead > len(active)/2 {
			active = slices.DeleteFunc(active, func(a int32) bool { return mark[a] < 0 })
			dead = 0
		}
		// The active lives, latest started first: those before r get a
		// direct arc to it, but for those with a direct arc to one that
		// has (implied), found without a look at their uses; the others
		// conflict with r.
		from, dfrom := len(earlier), len(o.direct)
		// Room for all the active lives, doubling (append grows big slices
		// by a quarter, copying them over and over).
		earlier = grow(earlier, len(active))
		o.direct = grow(o.direct, len(active))
		for i := len(active) - 1; i >= 0; i-- {
			a := active[i]
			if k := mark[a]; k < 0 || k == r+1 {
				continue
			}
			if !before(a, r) {
				earlier = append(earlier, a)
				degree[a]++
				continue
			}
			o.direct = append(o.direct, a)
			lo := int32(0)
			if a > 0 {
				lo = o.directEnd[a-1]
			}
			for _, x := range o.direct[lo:o.directEnd[a]] {
				if mark[x] >= 0 {
					mark[x] = r + 1
				}
			}
		}
		slices.Reverse(earlier[from:])
		slices.Reverse(o.direct[dfrom:])
		degree[r] += int32(len(earlier) - from)
		o.directEnd = append(o.directEnd, int32(len(o.direct)))
		earlierEnd = append(earlierEnd, int32(len(earlier)))
		active = append(active, r)
	}
	// The conflicts of each, in one array: those started before it, then
	// those started after it, in the order they started.
	all := make([]int32, 2*len(earlier))
	at := 0
	for r, d := range degree {
		m := o.byStart[r]
		o.conflicts[m] = all[at : at : at+int(d)]
		at += int(d)
	}
	prev := int32(0)
	for r, m := range o.byStart {
		for _, a := range earlier[prev:earlierEnd[r]] {
			o.conflicts[m] = append(o.conflicts[m], o.byStart[a])
			o.conflicts[o.byStart[a]] = append(o.conflicts[o.byStart[a]], m)
		}
		prev = earlierEnd[r]
	}
	return o
}

// grow returns s with room for n more, doubling its capacity when it
// needs more.
func grow(s []int32, n int) []int32 {
	if len(s)+n <= cap(s) {
		return s
	}
	return slices.Grow(s, max(n, len(s)))
}

// packArena gives each temporary of ls (all of one memory, conflicts[i]
// those that may be live with ls[i]) an offset and returns the arena's
// size. It tries the greedy packing in a few orders, and then, while the
// arena is above peak (no arena can be smaller) and the work stays
// bounded, improves the best packing by a local search: the smallest arena
// wins.
func packArena(ls []*life, conflicts [][]int32, peak int64) int64 {
	n := len(ls)
	if n == 0 {
		return 0
	}
	// The keys of the orders, at hand.
	bytes, start, span := make([]int64, n), make([]int, n), make([]int, n)
	for i, l := range ls {
		bytes[i], start[i], span[i] = l.t.Bytes, l.start, l.end-l.start
	}
	pairs := 0
	for _, cs := range conflicts {
		pairs += len(cs)
	}
	pairs /= 2
	var load []int64 // the bytes that may be live with each, once an order needs them
	loads := func() {
		load = make([]int64, n)
		for i, cs := range conflicts {
			load[i] = bytes[i]
			for _, j := range cs {
				load[i] = dag.AddSat(load[i], bytes[j])
			}
		}
	}
	bySize := func(a, b int) int {
		if bytes[a] != bytes[b] {
			return cmp.Compare(bytes[b], bytes[a])
		}
		if start[a] != start[b] {
			return cmp.Compare(start[a], start[b])
		}
		return cmp.Compare(a, b)
	}
	orders := []func(a, b int) int{
		bySize,
		func(a, b int) int {
			if load[a] != load[b] {
				return cmp.Compare(load[b], load[a])
			}
			return bySize(a, b)
		},
		func(a, b int) int {
			if span[a] != span[b] {
				return cmp.Compare(span[b], span[a])
			}
			return bySize(a, b)
		},
		func(a, b int) int {
			if start[a] != start[b] {
				return cmp.Compare(start[a], start[b])
			}
			return bySize(a, b)
		},
	}
	work := n + 2*pairs + 1 // the cost of one greedy packing
	var best []int64
	bestSize := int64(-1)
	try := func(order []int, how fit) ([]int64, int64) {
		offsets, size := greedyFit(bytes, conflicts, order, how)
		if bestSize < 0 || size < bestSize {
			best, bestSize = offsets, size
		}
		return offsets, size
	}
	// The best packing of each order, to start a local search from.
	type packing struct {
		offsets []int64
		size    int64
	}
	var starts []packing
	order := make([]int, n)
	for k, by := range orders {
		switch k {
		case 0:
			sortBySize(order, bytes, start)
		case 1:
			loads()
			fallthrough
		default:
			for i := range order {
				order[i] = i
			}
			slices.SortFunc(order, by)
		}
		st := packing{size: -1}
		for _, how := range []fit{{best: true}, {}, {best: true, high: true, height: peak}} {
			if o, size := try(order, how); st.size < 0 || size < st.size {
				st = packing{o, size}
			}
			if bestSize <= peak || work > maxPackWork/16 {
				break // big memories: one packing per order
			}
		}
		if bestSize <= peak {
			break
		}
		starts = append(starts, st)
	}
	// A local search from each, smallest first, sharing the work.
	slices.SortStableFunc(starts, func(a, b packing) int { return cmp.Compare(a.size, b.size) })
	tries := min(maxImprove, maxPackWork/work)
	for k, st := range starts {
		if bestSize <= peak {
			break
		}
		improve(ls, conflicts, st.offsets, st.size, peak, tries/len(starts), uint64(k), try)
	}
	for i, l := range ls {
		l.t.Offset = best[i]
	}
	return max(bestSize, 0)
}

// sortBySize sets order to the temporaries by size, largest first, then by
// start, then by index (the packer's first order): by a radix sort on
// start and then on size, stable both.
func sortBySize(order []int, bytes []int64, start []int) {
	n := len(order)
	for i := range order {
		order[i] = i
	}
	keys := make([]uint64, n)
	for i, s := range start {
		keys[i] = uint64(s) + 1 // from -1, for none
	}
	tmp := make([]int, n)
	radixSort(order, tmp, keys)
	top := slices.Max(bytes)
	for i, b := range bytes {
		keys[i] = uint64(top - b)
	}
	radixSort(order, tmp, keys)
}

// radixSort sorts order (indices into keys) by key, stably, through tmp.
func radixSort(order, tmp []int, keys []uint64) {
	const bits = 11
	var count [1 << bits]int
	var most uint64
	for _, k := range keys {
		most |= k
	}
	for shift := 0; shift < 64 && most>>shift != 0; shift += bits {
		clear(count[:])
		for _, i := range order {
			count[keys[i]>>shift&(1<<bits-1)]++
		}
		at := 0
		for d, c := range count {
			count[d] = at
			at += c
		}
		for _, i := range order {
			d := keys[i] >> shift & (1<<bits - 1)
			tmp[count[d]] = i
			count[d]++
		}
		copy(order, tmp)
	}
}

// improve searches for a packing smaller than offsets (of size size), by
// at most tries greedy packings through try, which keeps the smallest. Each
// step takes the current packing's order by offset (in which first fit
// packs no higher), moves one temporary that ends above peak to an earlier
// place, now and then swaps two others, and packs again, by first fit and
// best fit in turn; it keeps the result when it is no larger (on a tie,
// when fewer bytes lie above peak, or now and then anyway, to drift along
// a plateau). It stops at peak, or after maxStall packings without a
// smaller arena.
func improve(ls []*life, conflicts [][]int32, offsets []int64, size, peak int64, tries int, seed uint64, try func([]int, fit) ([]int64, int64)) {
	n := len(ls)
	if size <= peak || tries <= 0 || n < 2 {
		return
	}
	r := rand.New(rand.NewPCG(uint64(n)<<8|seed, uint64(size)))
	above := func(o []int64) int64 {
		var x int64
		for i, l := range ls {
			x = dag.AddSat(x, max(0, dag.AddSat(o[i], l.t.Bytes)-peak))
		}
		return x
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	cur, curSize, curAbove := offsets, size, above(offsets)
	best, stall := size, 0
	var tops []int
	for k := range tries {
		if best <= peak || stall >= maxStall {
			return
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(cur[a], cur[b]), cmp.Compare(a, b)) })
		tops = tops[:0]
		for at, i := range order {
			if dag.AddSat(cur[i], ls[i].t.Bytes) > peak {
				tops = append(tops, at)
			}
		}
		from := tops[r.IntN(len(tops))]
		to := 0
		if r.IntN(2) == 0 {
			to = r.IntN(from + 1)
		}
		x := order[from]
		copy(order[to+1:from+1], order[to:from])
		order[to] = x
		if r.IntN(2) == 0 {
			a, b := r.IntN(n), r.IntN(n)
			order[a], order[b] = order[b], order[a]
		}
		o, s := try(order, []fit{{best: true}, {}, {best: true, high: true, height: peak}}[k%3])
		if s < best {
			best, stall = s, 0
		} else {
			stall++
		}
		if s < curSize {
			cur, curSize, curAbove = o, s, above(o)
		} else if s == curSize {
			if a := above(o); a <= curAbove || r.IntN(4) == 0 {
				cur, curAbove = o, a
			}
		}
	}
}

// The packer's bounds on its local search.
const (
	maxImprove  = 2000    // packings tried
	maxStall    = 2000    // packings tried since the arena last shrank
	maxPackWork = 1 << 22 // temporaries plus twice the conflicts, summed over the packings tried
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

// greedyFit places the temporaries (of sizes bytes) in order, each in a
// gap that holds it between the conflicting temporaries placed before it,
// or above them all.
func greedyFit(bytes []int64, conflicts [][]int32, order []int, how fit) ([]int64, int64) {
	type span struct{ lo, hi int64 }
	spans := make([]span, len(bytes)) // of each placed, lo -1 for the others
	for i := range spans {
		spans[i].lo = -1
	}
	var busy []span
	var size int64
	for _, i := range order {
		// The placed ones, without a branch on each.
		cs := conflicts[i]
		busy = slices.Grow(busy[:0], len(cs))[:len(cs)]
		k := 0
		for _, j := range cs {
			sp := spans[j]
			busy[k] = sp
			k += int(uint64(sp.lo)>>63 ^ 1)
		}
		busy = busy[:k]
		if len(busy) <= 32 { // few: by insertion, inline (spans that start together may come in any order)
			for k := 1; k < len(busy); k++ {
				for j := k; j > 0 && busy[j].lo < busy[j-1].lo; j-- {
					busy[j], busy[j-1] = busy[j-1], busy[j]
				}
			}
		} else {
			slices.SortFunc(busy, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
		}
		need := bytes[i]
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
		spans[i] = span{at, dag.AddSat(at, need)}
		size = max(size, spans[i].hi)
	}
	offsets := make([]int64, len(bytes))
	for i, sp := range spans {
		offsets[i] = max(sp.lo, 0)
	}
	return offsets, size
}

// peakOf returns the heaviest set of temporaries of o no two of which are
// ordered (as indices of o.lives, in order), and its weight: by Dilworth's
// theorem, weighted, the weight of all minus a maximum flow in which each
// temporary sends its bytes to the ones it is ordered before (Fulkerson's
// reduction), along the paths of o's DAG: each temporary is a node out (fed
// by the source) and a node in (drained to the sink), and flow into in may
// pass on through out.
func peakOf(o *lifeOrder) (int64, []int32) {
	return peakBy(o, (*flow).sourceSide)
}

// peakBy is peakOf with the minimum cut nearest the source found by
// sourceSide.
func peakBy(o *lifeOrder, sourceSide func(f *flow, s, t int) []bool) (int64, []int32) {
	ls := o.lives
	n := len(ls)
	if n == 0 {
		return 0, nil
	}
	out := func(i int32) int { return int(i) }
	in := func(i int32) int { return n + int(i) }
	barrier := func(k int32) int { return 2*n + int(k) }
	src, sink := 2*n+o.barriers, 2*n+o.barriers+1
	edges := 3*n + max(o.barriers-1, 0) + len(o.direct)
	for i := range ls {
		if o.retiredAt[i] >= 0 {
			edges++
		}
		if o.startsAt[i] >= 0 {
			edges++
		}
	}
	f := newFlow(2*n+o.barriers+2, edges)
	// The arcs a greedy first flow goes along, by life and by barrier.
	srcArc, sinkArc, retireArc, startArc := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	chainArc := make([]int32, max(o.barriers-1, 0))
	arc := func() int32 { return int32(len(f.to)) }
	for i, l := range ls {
		srcArc[i] = arc()
		f.edge(src, out(int32(i)), l.t.Bytes)
		sinkArc[i] = arc()
		f.edge(in(int32(i)), sink, l.t.Bytes)
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
			pool = append(pool, offer{byRetire[next], ls[byRetire[next]].t.Bytes})
		}
		want := ls[m].t.Bytes
		for want > 0 && len(pool) > 0 {
			x := &pool[0]
			d := min(want, x.left)
			send(srcArc[x.life], d)
			send(retireArc[x.life], d)
			chain[o.retiredAt[x.life]] += d
			chain[j] -= d
			send(startArc[m], d)
			send(sinkArc[m], d)
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
	reach := sourceSide(f, src, sink)
	var peak []int32
	var weight int64
	for i, l := range ls {
		if reach[out(int32(i))] && !reach[in(int32(i))] {
			peak = append(peak, int32(i))
			weight = dag.AddSat(weight, l.t.Bytes)
		}
	}
	slices.SortFunc(peak, func(a, b int32) int { return cmp.Compare(ls[a].t.Buffer, ls[b].t.Buffer) })
	return weight, peak
}
