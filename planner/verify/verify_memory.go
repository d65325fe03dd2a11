package verify

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/radix"
	"github.com/dagrun/dagrun/planner/plan"
)

// checkArenas checks p.Memory's arenas, where the plan has them: it
// returns an error in the places (collectArenas), and puts the first need
// of two temporaries that share bytes that the plan does not meet in
// v.overlapping (checkPairs, after replayArenas). It needs checkSteps and
// collectLifetimes, and nothing of checkOrder: it replays the steps
// itself, so that it can run while the conflicts are collected. The error
// and the need are to be reported once the order is checked.
func (v *verifier) checkArenas() error {
	if err := v.collectArenas(); err != nil {
		return err
	}
	v.replayArenas()
	v.checkPairs()
	return nil
}

// collectArenas checks p.Memory's arenas, where the plan has them: every
// temporary the graph uses has one place, aligned and inside its memory's
// arena; and it needs any two temporaries whose bytes overlap to be
// ordered, every use of one happening before every use of the other,
// which checkPairs checks once replayArenas has replayed the steps. A
// temporary's uses are the ops that access it other than its Alloc and
// Free (which do nothing in an arena), or those two when nothing else
// names it.
//
// Among temporaries with uses, "every use of x happens before every use of
// y" is transitive, and x's first use (in submission order) then comes
// before y's; so the temporaries over a byte are pairwise ordered exactly
// when each is ordered before the next in first-use order. A sweep of
// each arena by offset keeps the temporaries over the bytes swept to in
// that order, and needs each temporary ordered after the one before it and
// before the one after it when the sweep reaches its offset; one that ends
// leaves its neighbours ordered through it. A pair is ordered when the
// last use of the first on each stream happens before the first use of
// the second on each stream.
//
// It is written apart from the packer (MemoryOf): it compares uses,
// against the clocks of a replay of the steps, where the packer compares
// meets of vector clocks.
//
// An error in the places is returned; the pairs that must be ordered go
// to v.arenaPairs, for checkPairs once the replay is done.
func (v *verifier) collectArenas() error {
	m := v.p.Memory
	if m == nil {
		return nil
	}
	g := v.p.Graph
	arena := map[int]int64{}
	for _, u := range m.Memories {
		if _, dup := arena[u.Device]; dup {
			return &Error{Kind: ArenaOverlap, Msg: fmt.Sprintf("memory %s is listed twice", plan.MemoryName(u.Device))}
		}
		arena[u.Device] = u.ArenaBytes
	}
	if len(m.Temporaries) == 0 && !slices.ContainsFunc(g.Buffers, func(b *dag.Buffer) bool { return b.Temporary }) {
		return nil // nothing to place, nothing placed: the walk below would find nothing
	}
	placed := make([]*plan.Temporary, len(g.Buffers))
	for i := range m.Temporaries {
		t := &m.Temporaries[i]
		if t.Buffer < 0 || t.Buffer >= len(g.Buffers) || !g.Buffers[t.Buffer].Temporary {
			return &Error{Kind: ArenaOverlap, Msg: fmt.Sprintf("the arenas place buffer %d, which is not a temporary of the graph", t.Buffer)}
		}
		b := g.Buffers[t.Buffer]
		size, ok := arena[t.Device]
		bad := func(format string, a ...any) error {
			return &Error{Kind: ArenaOverlap, Msg: fmt.Sprintf("temporary %s ", b.Name) + fmt.Sprintf(format, a...)}
		}
		switch {
		case placed[t.Buffer] != nil:
			return bad("has two places in the arenas")
		case t.Device != plan.BufferMemory(b):
			return bad("is placed in %s but lives in %s", plan.MemoryName(t.Device), plan.MemoryName(plan.BufferMemory(b)))
		case !ok:
			return bad("is placed in %s, which has no arena", plan.MemoryName(t.Device))
		case t.Bytes < b.Size:
			return bad("gets %d bytes of its arena for its %d", t.Bytes, b.Size)
		case t.Offset < 0 || t.Offset%plan.ArenaAlign != 0:
			return bad("is at offset %d, not a multiple of %d", t.Offset, plan.ArenaAlign)
		case t.Offset > size || t.Bytes > size-t.Offset:
			return bad("at [%d, %d+%d) does not fit its arena of %d bytes", t.Offset, t.Offset, t.Bytes, size)
		}
		placed[t.Buffer] = t
	}
	ns := v.streams
	firstOn, lastOn, first, byFirst, ok := v.lifetimeUses(placed)
	if !ok {
		var err error
		if firstOn, lastOn, first, byFirst, err = v.walkUses(placed); err != nil {
			return err
		}
	}
	// The sweep, by offset, taking the temporaries that end from a list by
	// end; both lists hold ranks, the places in byFirst.
	type span struct {
		device int
		lo, hi int64
	}
	spans := make([]span, len(byFirst))
	for r, b := range byFirst {
		t := placed[b]
		spans[r] = span{t.Device, t.Offset, t.Offset + t.Bytes}
	}
	// Both by device, then by offset, then by rank: radix sorts, stable,
	// of offsets in units of ArenaAlign, whose digits are fewer. Offsets
	// are multiples of it, so an end rounded up to one compares with every
	// offset as the end does.
	n := len(spans)
	tmp, keys := make([]int, n), make([]uint64, n)
	byOffset := func(off func(sp span) int64) []int {
		order := make([]int, n)
		for r := range order {
			order[r] = r
		}
		low := 0
		for r, sp := range spans {
			keys[r] = uint64(off(sp))
			low = min(low, sp.device)
		}
		radix.Sort(order, tmp, keys)
		for r, sp := range spans {
			keys[r] = uint64(sp.device - low)
		}
		radix.Sort(order, tmp, keys)
		return order
	}
	byEnd := byOffset(func(sp span) int64 { return (sp.hi-1)/plan.ArenaAlign + 1 })
	byLo := byOffset(func(sp span) int64 { return sp.lo / plan.ArenaAlign })
	v.arenaPairs = make([][2]int32, 0, 2*n)
	over := newRankSet(n) // the temporaries over the offset swept to
	ended := 0            // byEnd[:ended] are swept past
	for _, r := range byLo {
		t := spans[r]
		for ; ended < len(byEnd); ended++ {
			e := spans[byEnd[ended]]
			if e.device > t.device || e.device == t.device && e.hi > t.lo {
				break
			}
			over.remove(byEnd[ended])
		}
		over.add(r)
		if q := over.prev(r); q >= 0 {
			v.arenaPairs = append(v.arenaPairs, [2]int32{int32(q), int32(r)})
		}
		if q := over.next(r); q >= 0 {
			v.arenaPairs = append(v.arenaPairs, [2]int32{int32(r), int32(q)})
		}
	}
	// The replay keeps the clock of each first use on a stream of a
	// temporary with bytes.
	v.clockSlot = make([]int32, len(v.ops))
	for i := range v.clockSlot {
		v.clockSlot[i] = -1
	}
	slots := int32(0)
	for _, y := range byFirst {
		for _, w := range firstOn[int(y)*ns : int(y+1)*ns] {
			if w >= 0 && v.clockSlot[w] < 0 {
				v.clockSlot[w] = slots
				slots++
			}
		}
	}
	v.clocks = make([]int32, int(slots)*ns)
	v.places, v.firstUse = placed, first
	v.firstOn, v.lastOn, v.byFirst = firstOn, lastOn, byFirst
	return nil
}

// replayArenas replays the steps with a vector clock per stream, as
// checkOrder does, for what checkPairs compares: each op's place among its
// stream's runs (v.pos, from 1) and the clock of each use that clockSlot
// names, taken just before it runs.
func (v *verifier) replayArenas() {
	if len(v.arenaPairs) == 0 {
		return
	}
	p := v.p
	ns := v.streams
	clocks := newStreamClocks(ns, p.Events) // verify.go
	v.pos = make([]int32, len(v.ops))
	for _, st := range p.Steps {
		mine := clocks.step(st)
		if st.Kind != plan.Run {
			continue
		}
		if k := v.clockSlot[st.Op]; k >= 0 {
			copy(v.clocks[int(k)*ns:], mine)
		}
		mine[st.Stream]++
		v.pos[st.Op] = mine[st.Stream]
	}
}

// checkPairs checks, after the replay, the needs of the temporaries that
// share bytes (v.arenaPairs, by rank): x before y needs the last use of x
// on each stream to happen before the first use of y on each stream, which
// the order of the steps decides on one stream and the clock the replay
// kept of the later use across streams. The first need not met (in the
// replay's order, the order the sweep found them on a tie) goes to
// v.overlapping.
func (v *verifier) checkPairs() {
	if len(v.arenaPairs) == 0 {
		return
	}
	ns := v.streams
	at := v.at
	// By rank, the streams with a use, at hand: for the last use on each,
	// its place among the steps and among its stream's runs; for the first
	// use on each, its place among the steps and the slot of its clock.
	// Rank r's are lasts[lastEnd[r]:lastEnd[r+1]] and firsts[firstEnd[r]:
	// firstEnd[r+1]], by stream.
	type use struct{ s, at, pos int32 }
	n := len(v.byFirst)
	lastEnd, firstEnd := make([]int32, n+1), make([]int32, n+1)
	nl, nf := 0, 0
	for _, b := range v.byFirst {
		for s := range ns {
			nl += int(uint32(v.lastOn[int(b)*ns+s])>>31 ^ 1)
			nf += int(uint32(v.firstOn[int(b)*ns+s])>>31 ^ 1)
		}
	}
	lasts, firsts := make([]use, 0, nl), make([]use, 0, nf)
	for r, b := range v.byFirst {
		for s := range ns {
			if u := v.lastOn[int(b)*ns+s]; u >= 0 {
				lasts = append(lasts, use{int32(s), at[u], v.pos[u]})
			}
			if w := v.firstOn[int(b)*ns+s]; w >= 0 {
				firsts = append(firsts, use{int32(s), at[w], v.clockSlot[w]})
			}
		}
		lastEnd[r+1], firstEnd[r+1] = int32(len(lasts)), int32(len(firsts))
	}
	var worst [4]int32 // x, y, s, t
	found, worstAt := false, int32(0)
	for _, pair := range v.arenaPairs {
		x, y := pair[0], pair[1]
		ys := firsts[firstEnd[y]:firstEnd[y+1]]
		for _, l := range lasts[lastEnd[x]:lastEnd[x+1]] {
			for _, f := range ys {
				var met bool
				if l.s == f.s {
					met = l.at < f.at
				} else {
					met = v.clocks[int(f.pos)*ns+int(l.s)] >= l.pos
				}
				if !met && (!found || f.at < worstAt) {
					worst, worstAt, found = [4]int32{x, y, l.s, f.s}, f.at, true
				}
			}
		}
	}
	if found {
		x, y := v.byFirst[worst[0]], v.byFirst[worst[1]]
		v.overlapping = &need{before: v.lastOn[int(x)*ns+int(worst[2])], after: v.firstOn[int(y)*ns+int(worst[3])], why: needArena, buf: x, other: y}
	}
}

// The uses of the temporaries that the arenas' check needs: each
// temporary's first and last use on each stream (firstOn and lastOn, by
// buffer ID times the streams, -1 for none), its first use of all (first,
// by buffer ID, -1 for none), and the temporaries with uses and bytes in
// the order of their first uses (byFirst; those first used by one op in
// the order it names them). Uses are ordered by the place of their runs
// among the steps (v.at).

// walkUses finds the uses of the temporaries in a walk of the ops and one
// of the steps.
func (v *verifier) walkUses(placed []*plan.Temporary) (firstOn, lastOn, first, byFirst []int32, err error) {
	g := v.p.Graph
	ns := v.streams
	// The accesses of temporaries by op (once an op), in one pass over the
	// ops; named says which temporaries ops other than Alloc and Free name.
	type access struct {
		buf   int32
		plain bool // the op is no Alloc or Free
	}
	var accesses []access
	accessStart := make([]int32, len(v.ops)+1)
	named := make([]bool, len(g.Buffers))
	for id, op := range v.ops {
		accessStart[id] = int32(len(accesses))
		plain := op.Kind.Info().Lifetime == dag.NoLifetime
		for j, a := range op.Access {
			b := a.Buf
			if !b.Temporary {
				continue
			}
			if placed[b.ID] == nil {
				return nil, nil, nil, nil, &Error{Kind: ArenaOverlap, Ops: []string{op.Name}, Msg: fmt.Sprintf("temporary %s, which op %q uses, has no place in the arenas", b.Name, op.Name)}
			}
			named[b.ID] = named[b.ID] || plain
			if !slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == b }) {
				accesses = append(accesses, access{int32(b.ID), plain})
			}
		}
	}
	accessStart[len(v.ops)] = int32(len(accesses))

	// In one walk of the steps: each temporary's first and last use on
	// each stream, its first use of all, and the temporaries with uses and
	// bytes in the order of their first uses (byFirst, which ranks them).
	firstOn, lastOn = make([]int32, len(g.Buffers)*ns), make([]int32, len(g.Buffers)*ns)
	for i := range firstOn {
		firstOn[i], lastOn[i] = -1, -1
	}
	first = make([]int32, len(g.Buffers)) // the first use, -1 for none
	for i := range first {
		first[i] = -1
	}
	for _, st := range v.p.Steps {
		if st.Kind != plan.Run {
			continue
		}
		id := st.Op
		for _, a := range accesses[accessStart[id]:accessStart[id+1]] {
			if named[a.buf] != a.plain {
				continue
			}
			k := int(a.buf)*ns + int(st.Stream)
			if firstOn[k] < 0 {
				firstOn[k] = id
			}
			lastOn[k] = id
			if first[a.buf] < 0 {
				first[a.buf] = id
				if placed[a.buf].Bytes > 0 {
					byFirst = append(byFirst, a.buf)
				}
			}
		}
	}
	return firstOn, lastOn, first, byFirst, nil
}

// lifetimeUses finds the uses of the temporaries from the ops that
// collectLifetimes found, without a walk of the ops, where it ran, every
// Alloc and Free names one buffer and every temporary has a place (which
// walkUses reports otherwise).
func (v *verifier) lifetimeUses(placed []*plan.Temporary) (firstOn, lastOn, first, byFirst []int32, ok bool) {
	if v.temps == nil || !v.oneBuffer {
		return nil, nil, nil, nil, false
	}
	for _, l := range v.temps {
		if placed[l.buf] == nil {
			return nil, nil, nil, nil, false
		}
	}
	g := v.p.Graph
	ns := v.streams
	at := v.at
	firstOn, lastOn = make([]int32, len(g.Buffers)*ns), make([]int32, len(g.Buffers)*ns)
	for i := range firstOn {
		firstOn[i], lastOn[i] = -1, -1
	}
	first = make([]int32, len(g.Buffers))
	for i := range first {
		first[i] = -1
	}
	// The temporaries with bytes by their first uses' places (bufs, by
	// keys).
	keys, bufs := make([]uint64, 0, len(v.temps)), make([]int32, 0, len(v.temps))
	for _, l := range v.temps {
		uses := l.users
		if len(uses) == 0 {
			uses = []int32{l.alloc[0], l.free[0]}
		}
		b := int(l.buf)
		on := firstOn[b*ns : (b+1)*ns]
		off := lastOn[b*ns : (b+1)*ns]
		for _, u := range uses {
			s := v.stream[u]
			if w := on[s]; w < 0 || at[u] < at[w] {
				on[s] = u
			}
			if w := off[s]; w < 0 || at[u] > at[w] {
				off[s] = u
			}
			if w := first[b]; w < 0 || at[u] < at[w] {
				first[b] = u
			}
		}
		if placed[b].Bytes > 0 {
			keys, bufs = append(keys, uint64(at[first[b]])), append(bufs, int32(b))
		}
	}
	// By a radix sort, in as few digits as the places need.
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	radix.Sort(order, make([]int, len(keys)), keys)
	byFirst = make([]int32, len(keys))
	for i, k := range order {
		byFirst[i] = bufs[k]
	}
	// Those first used by one op, together now in some order, go in the
	// order the op names them.
	for i := 0; i < len(byFirst); {
		j := i + 1
		for j < len(byFirst) && first[byFirst[j]] == first[byFirst[i]] {
			j++
		}
		if j-i > 1 {
			acc := v.ops[first[byFirst[i]]].Access
			named := func(b int32) int {
				return slices.IndexFunc(acc, func(a dag.Access) bool { return a.Buf.ID == int(b) })
			}
			slices.SortFunc(byFirst[i:j], func(x, y int32) int { return cmp.Compare(named(x), named(y)) })
		}
		i = j
	}
	return firstOn, lastOn, first, byFirst, true
}

// overlap describes the need n of temporaries that share bytes, which the
// plan does not meet.
func (v *verifier) overlap(n need) error {
	g := v.p.Graph
	a, b := v.places[n.buf], v.places[n.other]
	if cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Buffer, b.Buffer)) > 0 {
		a, b = b, a
	}
	lo, hi := max(a.Offset, b.Offset), min(a.Offset+a.Bytes, b.Offset+b.Bytes)
	ops := []string{v.opName(v.firstUse[a.Buffer]), v.opName(v.firstUse[b.Buffer])}
	return &Error{Kind: ArenaOverlap, Ops: ops,
		Msg: fmt.Sprintf("temporaries %s and %s share bytes [%d, %d) of the arena of %s, and the plan does not order the uses of one before the other",
			g.Buffers[a.Buffer].Name, g.Buffers[b.Buffer].Name, lo, hi, plan.MemoryName(a.Device))}
}

// rankSet is a set of the integers [0, n), with the next and previous
// member of any member: a tree of 64-bit words, each bit of a word above
// set when that word of the level below has a bit set.
type rankSet struct {
	levels [][]uint64 // levels[0] holds the members
}

func newRankSet(n int) *rankSet {
	s := &rankSet{}
	for {
		words := (n + 63) / 64
		s.levels = append(s.levels, make([]uint64, max(words, 1)))
		if words <= 1 {
			return s
		}
		n = words
	}
}

func (s *rankSet) add(x int) {
	for _, l := range s.levels {
		l[x>>6] |= 1 << (x & 63)
		x >>= 6
	}
}

func (s *rankSet) remove(x int) {
	for _, l := range s.levels {
		if l[x>>6] &^= 1 << (x & 63); l[x>>6] != 0 {
			return
		}
		x >>= 6
	}
}

// next returns the smallest member above x, -1 for none.
func (s *rankSet) next(x int) int {
	k := 0
	for ; k < len(s.levels); k++ {
		if m := s.levels[k][x>>6] & (^uint64(0) << (x&63 + 1)); m != 0 {
			x = x&^63 | bits.TrailingZeros64(m)
			break
		}
		x >>= 6
	}
	if k == len(s.levels) {
		return -1
	}
	for ; k > 0; k-- {
		x = x<<6 | bits.TrailingZeros64(s.levels[k-1][x])
	}
	return x
}

// prev returns the largest member below x, -1 for none.
func (s *rankSet) prev(x int) int {
	k := 0
	for ; k < len(s.levels); k++ {
		if m := s.levels[k][x>>6] & (1<<(x&63) - 1); m != 0 {
			x = x&^63 | (63 - bits.LeadingZeros64(m))
			break
		}
		x >>= 6
	}
	if k == len(s.levels) {
		return -1
	}
	for ; k > 0; k-- {
		x = x<<6 | (63 - bits.LeadingZeros64(s.levels[k-1][x]))
	}
	return x
}
