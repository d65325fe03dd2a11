package planner

import (
	"cmp"
	"container/heap"
	"fmt"
	"math/bits"
	"slices"

	"github.com/dagrun/dagrun/dag"
)

// checkArenas checks p.Memory's arenas, where the plan has them: every
// temporary the graph uses has one place, aligned and inside its memory's
// arena, and any two temporaries whose bytes overlap are ordered, every use
// of one happening before every use of the other. A temporary's uses are
// the ops that access it other than its Alloc and Free (which do nothing in
// an arena), or those two when nothing else names it.
//
// It is written apart from the packer (MemoryOf): it keeps each use's own
// vector clock and compares uses, where the packer compares meets.
func (v *verifier) checkArenas() error {
	m := v.p.Memory
	if m == nil {
		return nil
	}
	g := v.p.Graph
	arena := map[int]int64{}
	for _, u := range m.Memories {
		if _, dup := arena[u.Device]; dup {
			return &VerifyError{Kind: ArenaOverlap, Msg: fmt.Sprintf("memory %s is listed twice", memoryName(u.Device))}
		}
		arena[u.Device] = u.ArenaBytes
	}
	if len(m.Temporaries) == 0 && !slices.ContainsFunc(g.Buffers, func(b *dag.Buffer) bool { return b.Temporary }) {
		return nil // nothing to place, nothing placed: the walk below would find nothing
	}
	placed := make([]*Temporary, len(g.Buffers))
	for i := range m.Temporaries {
		t := &m.Temporaries[i]
		if t.Buffer < 0 || t.Buffer >= len(g.Buffers) || !g.Buffers[t.Buffer].Temporary {
			return &VerifyError{Kind: ArenaOverlap, Msg: fmt.Sprintf("the arenas place buffer %d, which is not a temporary of the graph", t.Buffer)}
		}
		b := g.Buffers[t.Buffer]
		size, ok := arena[t.Device]
		bad := func(format string, a ...any) error {
			return &VerifyError{Kind: ArenaOverlap, Msg: fmt.Sprintf("temporary %s ", b.Name) + fmt.Sprintf(format, a...)}
		}
		switch {
		case placed[t.Buffer] != nil:
			return bad("has two places in the arenas")
		case t.Device != memoryOf(b):
			return bad("is placed in %s but lives in %s", memoryName(t.Device), memoryName(memoryOf(b)))
		case !ok:
			return bad("is placed in %s, which has no arena", memoryName(t.Device))
		case t.Bytes < b.Size:
			return bad("gets %d bytes of its arena for its %d", t.Bytes, b.Size)
		case t.Offset < 0 || t.Offset%ArenaAlign != 0:
			return bad("is at offset %d, not a multiple of %d", t.Offset, ArenaAlign)
		case t.Offset > size || t.Bytes > size-t.Offset:
			return bad("at [%d, %d+%d) does not fit its arena of %d bytes", t.Offset, t.Offset, t.Bytes, size)
		}
		placed[t.Buffer] = t
	}

	// Each use of each temporary, with the clock of its stream just before
	// it runs.
	type use struct {
		stream, pos int32
		clock       []int32
	}
	uses := make([][]use, len(g.Buffers))
	named := make([]bool, len(g.Buffers)) // named by an op other than Alloc and Free
	for _, op := range g.Ops {
		for _, a := range op.Access {
			if a.Buf.Temporary && op.Kind.Info().Lifetime == dag.NoLifetime {
				named[a.Buf.ID] = true
			}
		}
	}
	for _, op := range g.Ops {
		for _, a := range op.Access {
			if a.Buf.Temporary && placed[a.Buf.ID] == nil {
				return &VerifyError{Kind: ArenaOverlap, Ops: []string{op.Name}, Msg: fmt.Sprintf("temporary %s, which op %q uses, has no place in the arenas", a.Buf.Name, op.Name)}
			}
		}
	}
	ns := v.streams
	clock := make([]int32, ns*ns)
	events := make([][]int32, v.p.Events)
	first := make([]int32, len(g.Buffers)) // the step of each temporary's first use
	for i, st := range v.p.Steps {
		s := int(st.Stream)
		mine := clock[s*ns : (s+1)*ns]
		switch st.Kind {
		case Record:
			events[st.Event] = slices.Clone(mine)
		case Wait:
			for t, c := range events[st.Event] {
				mine[t] = max(mine[t], c)
			}
		case Run:
			op := v.ops[st.Op]
			var snapshot []int32
			for j, a := range op.Access {
				b := a.Buf
				if !b.Temporary || named[b.ID] == (op.Kind.Info().Lifetime != dag.NoLifetime) ||
					slices.ContainsFunc(op.Access[:j], func(x dag.Access) bool { return x.Buf == b }) {
					continue
				}
				if snapshot == nil {
					snapshot = slices.Clone(mine)
				}
				if len(uses[b.ID]) == 0 {
					first[b.ID] = int32(i)
				}
				uses[b.ID] = append(uses[b.ID], use{stream: int32(s), pos: mine[s] + 1, clock: snapshot})
			}
			mine[s]++
		}
	}
	// last keeps, of each temporary's uses, the last on each stream: a
	// use that comes before a last use on its stream is done once that
	// one is.
	last := make([][]use, len(g.Buffers))
	for x, us := range uses {
		for _, u := range us {
			k := slices.IndexFunc(last[x], func(w use) bool { return w.stream == u.stream })
			if k < 0 {
				last[x] = append(last[x], u)
			} else if u.pos > last[x][k].pos {
				last[x][k] = u
			}
		}
	}
	// ordered reports whether every use of x happens before every use of y.
	ordered := func(x, y int) bool {
		for _, u := range last[x] {
			for _, w := range uses[y] {
				if w.clock[u.stream] < u.pos {
					return false
				}
			}
		}
		return true
	}

	// Sweep each arena by offset, keeping the temporaries over the bytes
	// swept to (those with uses and bytes) in the order of their first
	// uses. Among temporaries with uses, "every use of x happens before
	// every use of y" is transitive, and x's first use then comes before
	// y's; so the temporaries over a byte are pairwise ordered exactly when
	// each is ordered before the next in first-use order. Each temporary is
	// checked against its neighbours in that order when the sweep reaches
	// its offset; one that ends leaves its neighbours ordered through it.
	byOffset := slices.Clone(m.Temporaries)
	byOffset = slices.DeleteFunc(byOffset, func(t Temporary) bool { return t.Bytes == 0 || len(uses[t.Buffer]) == 0 })
	rank := make([]int32, len(g.Buffers)) // by buffer, the place in first-use order
	byFirst := slices.Clone(byOffset)
	slices.SortFunc(byFirst, func(a, b Temporary) int {
		return cmp.Or(cmp.Compare(first[a.Buffer], first[b.Buffer]), cmp.Compare(a.Buffer, b.Buffer))
	})
	for i, t := range byFirst {
		rank[t.Buffer] = int32(i)
	}
	slices.SortFunc(byOffset, func(a, b Temporary) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Buffer, b.Buffer))
	})
	over := newRankSet(len(byFirst)) // the temporaries over the offset swept to, by rank
	var ends endHeap
	for _, t := range byOffset {
		for len(ends) > 0 && (ends[0].device != t.Device || ends[0].end <= t.Offset) {
			over.remove(int(rank[ends.pop().buffer]))
		}
		r := int(rank[t.Buffer])
		over.add(r)
		ends.push(arenaEnd{end: t.Offset + t.Bytes, device: t.Device, buffer: t.Buffer})
		var a, b *Temporary // a pair that must be ordered, a first
		if q := over.prev(r); q >= 0 && !ordered(byFirst[q].Buffer, t.Buffer) {
			a, b = &byFirst[q], &t
		} else if q := over.next(r); q >= 0 && !ordered(t.Buffer, byFirst[q].Buffer) {
			a, b = &t, &byFirst[q]
		}
		if a == nil {
			continue
		}
		if cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Buffer, b.Buffer)) > 0 {
			a, b = b, a
		}
		var ops []string
		for _, x := range []int{a.Buffer, b.Buffer} {
			u := uses[x][0]
			ops = append(ops, v.opNameAt(u.stream, u.pos))
		}
		lo, hi := max(a.Offset, b.Offset), min(a.Offset+a.Bytes, b.Offset+b.Bytes)
		return &VerifyError{Kind: ArenaOverlap, Ops: ops,
			Msg: fmt.Sprintf("temporaries %s and %s share bytes [%d, %d) of the arena of %s, and the plan does not order the uses of one before the other",
				g.Buffers[a.Buffer].Name, g.Buffers[b.Buffer].Name, lo, hi, memoryName(a.Device))}
	}
	return nil
}

// opNameAt names the pos-th op (from 1) run on stream s.
func (v *verifier) opNameAt(s, pos int32) string {
	n := int32(0)
	for _, st := range v.p.Steps {
		if st.Kind == Run && st.Stream == s {
			if n++; n == pos {
				return v.opName(st.Op)
			}
		}
	}
	return fmt.Sprintf("#%d on stream %d", pos, s)
}

// memoryName names a memory for people.
func memoryName(dev int) string {
	switch dev {
	case PinnedMemory:
		return "pinned host memory"
	case PageableMemory:
		return "pageable host memory"
	}
	return fmt.Sprintf("device %d", dev)
}

// MemoryName names memory dev for people: "device N", "pinned host memory"
// or "pageable host memory".
func MemoryName(dev int) string { return memoryName(dev) }

// arenaEnd is where a temporary's bytes end, for the sweep of checkArenas.
type arenaEnd struct {
	end    int64
	device int
	buffer int
}

// endHeap is a min-heap of arenaEnds, by device and then end.
type endHeap []arenaEnd

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(h[i].device, h[j].device), cmp.Compare(h[i].end, h[j].end)) < 0
}
func (h endHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(arenaEnd)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
func (h *endHeap) push(e arenaEnd) { heap.Push(h, e) }
func (h *endHeap) pop() arenaEnd   { return heap.Pop(h).(arenaEnd) }

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
