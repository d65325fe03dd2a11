package cpu

import (
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

var (
	_ device.ArenaUser   = (*Session)(nil)
	_ device.HighWaterer = (*Session)(nil)
)

// arenas holds a session's temporaries when they live in arenas: one byte
// slice per memory, each temporary a sub-slice at its offset, bound for the
// session's life, so its Alloc and Free ops do nothing.
type arenas struct {
	mem   map[int][]byte // by memory: a device ordinal, or -1/-2 for pinned/pageable host memory
	bytes int64          // all the arenas' bytes
}

// UseArenas allocates one arena of arenas[m] bytes for each memory m and
// places each temporary buffer b at offsets[b.ID] of the arena of its
// memory (its device, -1 for pinned, -2 for pageable host memory); from
// then on the temporaries' Alloc and Free ops do nothing. Call it before
// anything runs. The executor calls it for its arena mode.
func (b *Session) UseArenas(sizes map[int]int64, offsets []int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if b.arenas != nil {
		return errors.New("cpu: UseArenas: the session's temporaries are in arenas already")
	}
	if len(offsets) != len(b.g.Buffers) {
		return fmt.Errorf("cpu: UseArenas: %d offsets for %d buffers", len(offsets), len(b.g.Buffers))
	}
	a := &arenas{mem: map[int][]byte{}}
	for m, n := range sizes {
		if err := checkHostAlloc(fmt.Sprintf("the arena of memory %d", m), n); err != nil {
			return fmt.Errorf("cpu: UseArenas: %w", err)
		}
		a.mem[m] = make([]byte, n)
		a.bytes += n
	}
	mem := make([][]byte, len(b.g.Buffers))
	for i, buf := range b.g.Buffers {
		if !buf.Temporary {
			continue
		}
		if b.mem[i] != nil {
			return fmt.Errorf("cpu: UseArenas: temporary %s is allocated already", buf.Name)
		}
		arena, off := a.mem[memoryOf(buf)], offsets[i]
		if off < 0 {
			continue // no place: a temporary no op uses
		}
		if arena == nil || off > int64(len(arena)) || buf.Size > int64(len(arena))-off {
			return fmt.Errorf("cpu: UseArenas: temporary %s at offset %d does not fit its arena of %d bytes", buf.Name, off, len(arena))
		}
		mem[i] = arena[off : off+buf.Size : off+buf.Size]
	}
	for i, m := range mem {
		if m != nil {
			b.mem[i] = m
		}
	}
	b.arenas = a
	return nil
}

// inArena reports whether op is an Alloc or Free that an arena makes
// nothing of. Call it under the lock.
func (b *Session) inArena(op *dag.Op) bool {
	return b.arenas != nil && (op.Kind.Info().Lifetime != dag.NoLifetime)
}

// ArenaBytes is the size of the session's arenas in all (0 without them):
// the most temporary memory the session holds.
func (b *Session) ArenaBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.arenas == nil {
		return 0
	}
	return b.arenas.bytes
}

// memoryOf is the memory a buffer's arena is in, as the planner numbers
// memories.
func memoryOf(buf *dag.Buffer) int {
	switch buf.Placement {
	case dag.Pinned:
		return -1
	case dag.Pageable:
		return -2
	}
	return buf.Device
}

// countTemporary counts temporary buf as allocated (sign 1) or freed (-1)
// in the session's accounting of temporary bytes live at once: each
// rounded up to the arena alignment, as the planner counts them, at the
// moment its Alloc or Free takes effect. Call it under the lock.
func (b *Session) countTemporary(buf *dag.Buffer, sign int64) {
	if b.live == nil {
		b.live, b.high = map[int]int64{}, map[int]int64{}
	}
	m := memoryOf(buf)
	b.live[m] += sign * roundUpArena(buf.Size)
	b.high[m] = max(b.high[m], b.live[m])
}

// arenaAlign is planner.ArenaAlign (the planner is no import of a backend).
const arenaAlign = 256

func roundUpArena(n int64) int64 { return (n + arenaAlign - 1) &^ (arenaAlign - 1) }

// MemoryHighWater reports, by memory (a device ordinal, -1/-2 for pinned
// and pageable host memory), the most bytes of temporaries the session has
// held at once since it opened: the arena's size where the temporaries
// live in arenas, else the high-water mark of the temporaries allocated
// and not yet freed, each rounded up to 256 bytes as the planner counts
// them. Memories that held no temporary are absent.
func (b *Session) MemoryHighWater() map[int]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int]int64{}
	if b.arenas != nil {
		for m, a := range b.arenas.mem {
			out[m] = int64(len(a))
		}
		return out
	}
	for m, n := range b.high {
		if n > 0 {
			out[m] = n
		}
	}
	return out
}
