package memory

// Packing the temporaries of one memory into its arena: greedy fits in
// a few orders and a bounded local search (MemoryOf's last step).

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/radix"
	"github.com/dagrun/dagrun/planner/plan"
)

// packArena gives each temporary of o (all of one memory) an offset and
// returns the arena's size. It tries the greedy packing in a few orders,
// the first of them first (first, from firstPacking), and then, while the
// arena is above peak (no arena can be smaller) and the work stays
// bounded, improves the best packing by a local search: the smallest arena
// wins.
func packArena(o *lifeOrder, peak int64, first *packing) int64 {
	n := len(o.members)
	if n == 0 {
		return 0
	}
	// The keys of the orders, at hand.
	bytes, conflicts := o.bytes, o.conflicts
	start, span := first.start, first.span
	pairs := len(conflicts.to) / 2
	var load []int64 // the bytes that may be live with each, once an order needs them
	loads := func() {
		load = make([]int64, n)
		for i := range n {
			load[i] = bytes[i]
			for _, j := range conflicts.of(i) {
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
	take := func(offsets []int64, size int64) {
		if bestSize < 0 || size < bestSize {
			best, bestSize = offsets, size
		}
	}
	try := func(order []int, how fit) ([]int64, int64) {
		offsets, size := greedyFit(bytes, conflicts, order, how)
		take(offsets, size)
		return offsets, size
	}
	// The best packing of each order, to start a local search from.
	var starts []packing
	order := first.order
	for k, by := range orders {
		switch k {
		case 0: // sorted by firstPacking
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
		for f, how := range []fit{{best: true}, {}, {best: true, high: true, height: peak}} { // the first as firstPacking fits
			offsets, size := first.offsets, first.size
			if k == 0 && f == 0 {
				take(offsets, size)
			} else {
				offsets, size = try(order, how)
			}
			if st.size < 0 || size < st.size {
				st = packing{offsets: offsets, size: size}
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
		improve(bytes, conflicts, st.offsets, st.size, peak, tries/len(starts), uint64(k), try)
	}
	for i, x := range o.members {
		o.set.temps[x].Offset = best[i]
	}
	return max(bestSize, 0)
}

// packing is a packing of the temporaries of a lifeOrder: their offsets
// and the arena's size. The packer's first try, which needs no peak, keeps
// the order it packed in, and the keys of the other orders.
type packing struct {
	offsets     []int64
	size        int64
	order       []int
	start, span []int
}

// firstPacking is packArena's first try at o: by size, best fit. It
// gathers o's conflicts first.
func firstPacking(o *lifeOrder) *packing {
	o.gatherConflicts()
	n := len(o.members)
	p := &packing{order: make([]int, n), start: make([]int, n), span: make([]int, n)}
	for i, x := range o.members {
		p.start[i], p.span[i] = int(o.set.start[x]), int(o.set.end[x]-o.set.start[x])
	}
	sortBySize(p.order, o.bytes, p.start)
	p.offsets, p.size = greedyFit(o.bytes, o.conflicts, p.order, fit{best: true})
	return p
}

// sortBySize sets order to the temporaries by size, largest first, then by
// start, then by index (the packer's first order): by a radix sort on
// start and then on size, stable both. Sizes are multiples of ArenaAlign:
// in units of it, their digits are fewer.
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
	radix.Sort(order, tmp, keys)
	top := slices.Max(bytes)
	for i, b := range bytes {
		keys[i] = uint64(top-b) / plan.ArenaAlign
	}
	radix.Sort(order, tmp, keys)
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
func improve(bytes []int64, conflicts adjacency, offsets []int64, size, peak int64, tries int, seed uint64, try func([]int, fit) ([]int64, int64)) {
	n := len(bytes)
	if size <= peak || tries <= 0 || n < 2 {
		return
	}
	r := rand.New(rand.NewPCG(uint64(n)<<8|seed, uint64(size)))
	above := func(o []int64) int64 {
		var x int64
		for i, b := range bytes {
			x = dag.AddSat(x, max(0, dag.AddSat(o[i], b)-peak))
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
			if dag.AddSat(cur[i], bytes[i]) > peak {
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
func greedyFit(bytes []int64, conflicts adjacency, order []int, how fit) ([]int64, int64) {
	type span struct{ lo, hi int64 }
	spans := make([]span, len(bytes)) // of each placed, lo -1 for the others
	for i := range spans {
		spans[i].lo = -1
	}
	var busy []span
	var size int64
	for _, i := range order {
		// The placed ones, without a branch on each.
		cs := conflicts.of(i)
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
