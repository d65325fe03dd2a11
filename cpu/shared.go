package cpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

var _ device.MemorySharer = (*Backend)(nil)

// OpenShared is Open, except that g's persistent buffers that sh maps to
// buffers of owner (a session of b) use the first bytes of theirs, and
// its temporaries that sh places are in owner's arenas, at their offsets:
// sub-slices of owner's memory, made and filled by nobody here. Go's
// slices keep that memory alive whatever the order of the Closes; the
// caller still keeps owner open, and never runs the two at once
// (device.MemorySharer).
func (b *Backend) OpenShared(ctx context.Context, g *dag.Graph, owner device.Session, sh device.Shared) (device.Session, error) {
	if b == nil {
		return nil, errors.New("cpu: OpenShared: no backend; make one with cpu.New")
	}
	if g == nil {
		return nil, errors.New("cpu: OpenShared: no graph")
	}
	o, ok := owner.(*Session)
	if !ok || o.backend != b {
		return nil, fmt.Errorf("cpu: OpenShared: the owner (%T) is not a session of this backend", owner)
	}
	lent, a, err := o.lend(g, sh)
	if err != nil {
		return nil, err
	}
	s, err := b.open(ctx, g, lent, a)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// lend returns the memory of o that sh gives g's buffers, by g's buffer
// ID (nil where g's buffer has its own), and o's arenas as g's temporaries
// see them (nil when sh places none there).
func (o *Session) lend(g *dag.Graph, sh device.Shared) ([][]byte, *arenas, error) {
	o.sched.mu.Lock()
	defer o.sched.mu.Unlock()
	if err := o.sched.usable(); err != nil {
		return nil, nil, fmt.Errorf("cpu: OpenShared: the owner: %w", err)
	}
	og := o.memory.g
	lent := make([][]byte, len(g.Buffers))
	placed := false
	for i, buf := range g.Buffers {
		if buf == nil {
			continue // prepare refuses the graph
		}
		if buf.Temporary {
			if i >= len(sh.Offsets) || sh.Offsets[i] < 0 {
				continue
			}
			off := sh.Offsets[i]
			if o.memory.arenas == nil {
				return nil, nil, fmt.Errorf("cpu: OpenShared: temporary %s is placed in the owner's arenas, and the owner has none", buf.Name)
			}
			arena := o.memory.arenas.mem[memoryOf(buf)]
			if arena == nil || off > int64(len(arena)) || buf.Size > int64(len(arena))-off {
				return nil, nil, fmt.Errorf("cpu: OpenShared: temporary %s (%d bytes) at offset %d does not fit the owner's arena of %d bytes", buf.Name, buf.Size, off, len(arena))
			}
			lent[i], placed = arena[off:off+buf.Size:off+buf.Size], true
			continue
		}
		if i >= len(sh.Buffers) || sh.Buffers[i] == nil {
			continue
		}
		from := sh.Buffers[i]
		switch {
		case from.ID < 0 || from.ID >= len(og.Buffers) || og.Buffers[from.ID] != from || from.Temporary:
			return nil, nil, fmt.Errorf("cpu: OpenShared: buffer %s: %s is not a persistent buffer of the owner's graph", buf.Name, from.Name)
		case memoryOf(from) != memoryOf(buf):
			return nil, nil, fmt.Errorf("cpu: OpenShared: buffer %s is in memory %d, the owner's %s in memory %d", buf.Name, memoryOf(buf), from.Name, memoryOf(from))
		case from.Size < buf.Size:
			return nil, nil, fmt.Errorf("cpu: OpenShared: buffer %s (%d bytes) is larger than the owner's %s (%d)", buf.Name, buf.Size, from.Name, from.Size)
		}
		lent[i] = o.memory.mem[from.ID][:buf.Size:buf.Size]
	}
	if !placed {
		return lent, nil, nil
	}
	// The arenas are the owner's: the session holds none of their bytes.
	return lent, &arenas{mem: o.memory.arenas.mem}, nil
}
