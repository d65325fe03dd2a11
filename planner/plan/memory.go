package plan

import (
	"fmt"

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
	// SubmittedPeak is the most bytes of temporaries (rounded as above)
	// allocated and not yet freed at once in the order of the plan's steps:
	// what a stream-ordered pool holds in an eager run, which counts an
	// allocation from its submission to its free's (`--temporaries pool`;
	// the arena holds ArenaBytes whatever the order). It is one order's
	// figure, so it may lie above TemporaryPeak (allocations submitted
	// before earlier temporaries' frees) or below it (TemporaryPeak bounds
	// every timing).
	SubmittedPeak int64
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

// BufferMemory is the memory buffer b lives in.
func BufferMemory(b *dag.Buffer) int {
	switch b.Placement {
	case dag.Pinned:
		return PinnedMemory
	case dag.Pageable:
		return PageableMemory
	}
	return b.Device
}

// MemoryName names memory dev for people: "device N", "pinned host memory"
// or "pageable host memory".
func MemoryName(dev int) string {
	switch dev {
	case PinnedMemory:
		return "pinned host memory"
	case PageableMemory:
		return "pageable host memory"
	}
	return fmt.Sprintf("device %d", dev)
}
