package planner

import (
	"cmp"
	"fmt"
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
	for _, st := range v.p.Steps {
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
				uses[b.ID] = append(uses[b.ID], use{stream: int32(s), pos: mine[s] + 1, clock: snapshot})
			}
			mine[s]++
		}
	}
	// ordered reports whether every use of x happens before every use of y.
	ordered := func(x, y int) bool {
		for _, u := range uses[x] {
			for _, w := range uses[y] {
				if w.clock[u.stream] < u.pos {
					return false
				}
			}
		}
		return true
	}

	// Sweep each arena by offset: each temporary against those that start
	// inside it.
	byOffset := slices.Clone(m.Temporaries)
	slices.SortFunc(byOffset, func(a, b Temporary) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Buffer, b.Buffer))
	})
	for i, t := range byOffset {
		for _, o := range byOffset[i+1:] {
			if o.Device != t.Device || o.Offset >= t.Offset+t.Bytes {
				break
			}
			if ordered(t.Buffer, o.Buffer) || ordered(o.Buffer, t.Buffer) {
				continue
			}
			a, b := g.Buffers[t.Buffer], g.Buffers[o.Buffer]
			var ops []string
			for _, x := range []int{t.Buffer, o.Buffer} {
				if len(uses[x]) > 0 {
					u := uses[x][0]
					ops = append(ops, v.opNameAt(u.stream, u.pos))
				}
			}
			lo, hi := max(t.Offset, o.Offset), min(t.Offset+t.Bytes, o.Offset+o.Bytes)
			return &VerifyError{Kind: ArenaOverlap, Ops: ops,
				Msg: fmt.Sprintf("temporaries %s and %s share bytes [%d, %d) of the arena of %s, and the plan does not order the uses of one before the other", a.Name, b.Name, lo, hi, memoryName(t.Device))}
		}
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
