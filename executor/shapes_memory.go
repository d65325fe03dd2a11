package executor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/memory"
	"github.com/dagrun/dagrun/planner/plan"
)

// The memory of a Shapes: one holder, a device session opened on a graph
// of no ops whose buffers are every persistent buffer the shapes declare,
// each at its largest size, and whose arenas are the largest of the plans'
// arenas, memory by memory. Each shape's session is opened over it
// (device.MemorySharer): its persistent buffers are the first bytes of the
// holder's of the same name, and its temporaries sit at the plan's offsets
// in the holder's arenas.
//
// Why sharing the arenas is safe: a temporary lives inside one run (its
// Alloc and Free, or the run's start and end, bound every use of it, and
// dag refuses reads of bytes no op of the run wrote unless the buffer is
// declared uninitialised), within its own plan the packer lets two
// temporaries share bytes only where the plan orders them (verify.Verify
// checks it, and verify.Shared checks the plans together), and a Shapes
// runs one shape at a time, each run to its end (Sync) before the next
// starts. So no two shapes' temporaries are ever live at once, and the
// arena needs the largest plan's bytes, not their sum.

// lending is what the session of a shape takes from the holder: Open opens
// its device session with it.
type lending struct {
	sharer device.MemorySharer
	owner  device.Session
	shared device.Shared
	arenas bool // its temporaries are in the holder's arenas
}

func (l *lending) open(ctx context.Context, g *dag.Graph) (device.Session, error) {
	d, err := l.sharer.OpenShared(ctx, g, l.owner, l.shared)
	if err != nil {
		return nil, fmt.Errorf("executor: open a session over the shapes' memory: %w", err)
	}
	if d == nil {
		return nil, fmt.Errorf("executor: backend %T opened no shared session and reported no error", l.sharer)
	}
	return d, nil
}

// need is what one shape needs of the holder.
type need struct {
	shape   string        // the shape's values, for messages
	bufs    []*dag.Buffer // its persistent buffers
	arenas  map[int]int64 // by memory: its plan's arena, where it has temporaries
	offsets []int64       // by buffer ID: each temporary's place in its arena, -1 for none
}

// needOf is what shape key, planned as p, needs of the holder.
func needOf(key string, p *planner.Plan) need {
	n := need{shape: key, arenas: map[int]int64{}, offsets: make([]int64, len(p.Graph.Buffers))}
	for _, b := range p.Graph.Buffers {
		n.offsets[b.ID] = -1
		if !b.Temporary {
			n.bufs = append(n.bufs, b)
		}
	}
	m := p.Memory
	if m == nil {
		m = memory.Of(p)
	}
	for _, mu := range m.Memories {
		if mu.Temporaries > 0 {
			n.arenas[mu.Device] = mu.ArenaBytes
		}
	}
	for _, t := range m.Temporaries {
		n.offsets[t.Buffer] = t.Offset
	}
	return n
}

// holder is the memory the shapes share.
type holder struct {
	d      device.Session
	g      *dag.Graph
	byName map[string]*dag.Buffer
	from   map[string]string // by buffer name: the shape whose declaration the holder's is
	arenas map[int]int64     // by memory; nil when the temporaries are not in arenas
	// dirty says a shape ran, or Write wrote, since the holder was made:
	// its contents are no longer only the initial ones.
	dirty bool
}

// covers reports whether h holds everything n needs: every buffer, as
// large, and arenas as large.
func (h *holder) covers(n need) bool {
	if h == nil {
		return false
	}
	for _, b := range n.bufs {
		if hb := h.byName[b.Name]; hb == nil || hb.Size < b.Size {
			return false
		}
	}
	if h.arenas != nil {
		for m, size := range n.arenas {
			if h.arenas[m] < size {
				return false
			}
		}
	}
	return true
}

// lend is how the session of the shape n describes takes h's memory.
func (h *holder) lend(s device.MemorySharer, g *dag.Graph, n need) *lending {
	l := &lending{sharer: s, owner: h.d, shared: device.Shared{Buffers: make([]*dag.Buffer, len(g.Buffers))}}
	for _, b := range n.bufs {
		l.shared.Buffers[b.ID] = h.byName[b.Name]
	}
	if h.arenas != nil && len(n.arenas) > 0 {
		l.shared.Offsets, l.arenas = n.offsets, true
	}
	return l
}

// alike checks that shape a's buffer x and shape b's buffer y, of one
// name, can be one buffer: of one memory, and with initial contents of
// which the smaller's are the first bytes of the larger's (zeros, a value,
// seeded random numbers, which dag draws element by element from one
// stream, or bytes that begin alike), so that each shape starts from its
// own contents.
func alike(a string, x *dag.Buffer, b string, y *dag.Buffer) error {
	if x.Placement != y.Placement || x.Placement == dag.Device && x.Device != y.Device {
		return fmt.Errorf("buffer %q is in %s at %s and in %s at %s; the shapes share one buffer of each name, so give it one placement",
			x.Name, plan.MemoryName(plan.BufferMemory(x)), a, plan.MemoryName(plan.BufferMemory(y)), b)
	}
	small, large := x, y
	if small.Size > large.Size {
		small, large = large, small
	}
	si, li := small.Init, large.Init
	ok := true
	switch {
	case small.Uninitialized || si.Kind == dag.InitNone:
		// Its contents before a run are nobody's business.
	case si.Kind == dag.InitZeros:
		ok = li.Kind == dag.InitZeros || li.Kind == dag.InitNone || li.Kind == dag.InitValue && li.Value == 0
	case si.Kind == dag.InitValue, si.Kind == dag.InitRandom:
		ok = li.Kind == si.Kind && li.Value == si.Value && li.Seed == si.Seed && large.DType == small.DType
	case si.Kind == dag.InitBytes:
		ok = li.Kind == dag.InitBytes && int64(len(li.Data)) >= small.Size && bytes.Equal(li.Data[:small.Size], si.Data)
	}
	if !ok {
		return fmt.Errorf("buffer %q starts with other contents at %s than at %s (the first %d bytes differ); the shapes share one buffer of each name, whose contents are the larger shape's: give it contents of which the smaller are the first bytes, or declare it uninitialized and Write it",
			x.Name, a, b, small.Size)
	}
	return nil
}

// holderLayout is what a holder holds: each buffer's declaration (the
// largest shape's), the shape it comes from, and the arenas' sizes.
type holderLayout struct {
	decl   map[string]*dag.Buffer
	from   map[string]string
	arenas map[int]int64
}

// layout is the layout of the holder that covers h (nil: none yet) and
// ns: the buffers at their largest, and the arenas too. It fails where
// two shapes cannot share a buffer (alike).
func layout(h *holder, ns []need) (holderLayout, error) {
	l := holderLayout{decl: map[string]*dag.Buffer{}, from: map[string]string{}, arenas: map[int]int64{}}
	if h != nil {
		maps.Copy(l.decl, h.byName)
		maps.Copy(l.from, h.from)
		maps.Copy(l.arenas, h.arenas)
	}
	for _, n := range ns {
		for _, b := range n.bufs {
			if held := l.decl[b.Name]; held != nil {
				if err := alike(l.from[b.Name], held, n.shape, b); err != nil {
					return l, fmt.Errorf("executor: Shapes: %w", err)
				}
				if held.Size >= b.Size {
					continue
				}
			}
			l.decl[b.Name], l.from[b.Name] = b, n.shape
		}
		for m, size := range n.arenas {
			l.arenas[m] = max(l.arenas[m], size)
		}
	}
	return l, nil
}

// grow makes the holder that covers h (nil: none yet) and ns. The caller
// has closed every session over h. What h's buffers hold carries over
// into the first bytes of the new holder's, where a shape ran or Write
// wrote; then h closes.
func (s *Shapes) grow(ctx context.Context, h *holder, ns []need) (*holder, error) {
	l, err := layout(h, ns)
	if err != nil {
		return h, err
	}
	decl, from, arenas := l.decl, l.from, l.arenas
	g := &dag.Graph{}
	for _, name := range slices.Sorted(maps.Keys(decl)) {
		b := *decl[name] // a copy of the declaration, its initial contents too
		b.ID = len(g.Buffers)
		g.Buffers = append(g.Buffers, &b)
	}
	var carried map[string][]byte
	if h != nil {
		if carried, err = h.contents(); err != nil {
			return h, err
		}
		if err := h.d.Close(); err != nil {
			return nil, fmt.Errorf("executor: Shapes: close the shapes' memory to grow it: %w", err)
		}
	}
	if err := admitHolder(s.b, g, arenas); err != nil {
		return nil, err
	}
	// Its big host buffers are made ahead, on goroutines, as a session's
	// are (openDevice): pinned one page at a time inside Open instead, a
	// Shapes' first shape took twice a session of its own on the H200.
	release := func() {}
	if hp, ok := s.b.(device.HostPreparer); ok {
		release = hp.PrepareHost(g)
	}
	d, err := s.b.Open(ctx, g)
	if err != nil {
		release()
		return nil, fmt.Errorf("executor: Shapes: allocate the shapes' memory: %w", err)
	}
	nh := &holder{d: d, g: g, byName: map[string]*dag.Buffer{}, from: from}
	for _, b := range g.Buffers {
		nh.byName[b.Name] = b
	}
	if nh.arenas, err = s.holderArenas(d, g, arenas); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if err := nh.carry(carried); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return nh, nil
}

// holderArenas allocates the holder's arenas, as the session options ask
// and the backend allows, and returns their sizes: an empty map where no
// shape has temporaries yet, nil where the temporaries come from the pool.
func (s *Shapes) holderArenas(d device.Session, g *dag.Graph, arenas map[int]int64) (map[int]int64, error) {
	mode := s.cfg.temporaries
	if mode == TemporariesPool {
		return nil, nil
	}
	u, ok := d.(device.ArenaUser)
	if !ok {
		if mode == TemporariesArena {
			return nil, fmt.Errorf("executor: the backend's sessions (%T) cannot hold temporaries in arenas; use the pool", d)
		}
		return nil, nil
	}
	if len(arenas) > 0 {
		offsets := make([]int64, len(g.Buffers))
		for i := range offsets {
			offsets[i] = -1
		}
		if err := u.UseArenas(arenas, offsets); err != nil {
			if mode == TemporariesAuto {
				return nil, nil
			}
			return nil, fmt.Errorf("executor: Shapes: place temporaries in arenas: %w", err)
		}
	}
	return maps.Clone(arenas), nil
}

// contents reads what h's buffers hold, where that is more than their
// initial contents.
func (h *holder) contents() (map[string][]byte, error) {
	if !h.dirty {
		return nil, nil
	}
	out := map[string][]byte{}
	for _, b := range h.g.Buffers {
		data, err := h.d.Read(b)
		if err != nil {
			return nil, fmt.Errorf("executor: Shapes: keep buffer %q while the shapes' memory grows: %w", b.Name, err)
		}
		out[b.Name] = data
	}
	return out, nil
}

// carry writes what an earlier holder's buffers held into the first bytes
// of h's.
func (h *holder) carry(carried map[string][]byte) error {
	if len(carried) == 0 {
		return nil
	}
	w, ok := h.d.(device.Writer)
	if !ok {
		return fmt.Errorf("executor: Shapes: the device session %T cannot write buffers: what the shapes' buffers held cannot move into larger ones", h.d)
	}
	for _, b := range h.g.Buffers {
		old := carried[b.Name]
		if old == nil {
			continue
		}
		data := old
		if int64(len(old)) < b.Size {
			var err error
			if data, err = h.d.Read(b); err != nil {
				return fmt.Errorf("executor: Shapes: grow buffer %q: %w", b.Name, err)
			}
			copy(data, old)
		}
		if err := w.Write(b, data); err != nil {
			return fmt.Errorf("executor: Shapes: grow buffer %q: %w", b.Name, err)
		}
	}
	h.dirty = true
	return nil
}

// admitHolder is admission control for a holder of graph g with arenas:
// its buffers and arenas, memory by memory, against what b reports free.
func admitHolder(b device.Backend, g *dag.Graph, arenas map[int]int64) error {
	m, ok := b.(device.Memory)
	if !ok {
		return nil
	}
	hb, _ := b.(device.HostBacked)
	inHost := hb != nil && hb.DevicesInHostMemory()
	where := func(mem int) int {
		if mem < 0 || inHost {
			return device.HostMemory
		}
		return mem
	}
	needs := map[int]*MemoryNeed{}
	at := func(mem int) *MemoryNeed {
		if needs[mem] == nil {
			needs[mem] = &MemoryNeed{Device: mem}
		}
		return needs[mem]
	}
	for _, buf := range g.Buffers {
		n := at(where(plan.BufferMemory(buf)))
		n.Persistent = dag.AddSat(n.Persistent, buf.Size)
		n.Buffers = append(n.Buffers, buf)
	}
	for mem, size := range arenas {
		n := at(where(mem))
		n.Temporary = dag.AddSat(n.Temporary, size)
	}
	for _, dev := range slices.Sorted(maps.Keys(needs)) {
		n := needs[dev]
		free, total, err := m.FreeMemory(dev)
		if err != nil || n.Bytes() <= free {
			continue
		}
		slices.SortFunc(n.Buffers, func(a, b *dag.Buffer) int { return cmp.Compare(b.Size, a.Size) })
		return &MemoryError{Device: dev, Need: n.Bytes(), Free: free, Total: total, Buffers: n.Buffers}
	}
	return nil
}

// HeldMemory is what a Shapes holds in one memory for all its shapes.
type HeldMemory struct {
	Memory     int   // a device ordinal, plan.PinnedMemory or plan.PageableMemory
	Persistent int64 // the persistent buffers, each at the largest size of the shapes opened
	Arena      int64 // the temporaries' arena: the largest of the plans' arenas there
}
