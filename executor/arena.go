package executor

import (
	"fmt"

	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/memory"
)

// TemporaryMode says where a session's temporary buffers live.
type TemporaryMode uint8

const (
	// TemporariesAuto: in the plan's arenas where the backend's sessions
	// can hold them, else (or where the arenas cannot be allocated, so
	// that a temporary too large is an error of the op that allocates it)
	// in the pool.
	TemporariesAuto TemporaryMode = iota
	// TemporariesPool: each temporary is allocated from the backend's pool
	// by its Alloc op and given back by its Free op, at run time.
	TemporariesPool
	// TemporariesArena: each memory's temporaries are packed into one
	// arena (plan.Memory) allocated when the session opens; Alloc and
	// Free ops do nothing. A backend that cannot is an error.
	TemporariesArena
)

var temporaryModeNames = [...]string{TemporariesAuto: "auto", TemporariesPool: "pool", TemporariesArena: "arena"}

func (m TemporaryMode) String() string {
	if int(m) < len(temporaryModeNames) {
		return temporaryModeNames[m]
	}
	return fmt.Sprintf("TemporaryMode(%d)", uint8(m))
}

// ParseTemporaryMode returns the mode named s: auto, pool or arena.
func ParseTemporaryMode(s string) (TemporaryMode, bool) {
	for i, n := range temporaryModeNames {
		if n == s {
			return TemporaryMode(i), true
		}
	}
	return 0, false
}

// WithTemporaries says where the session's temporaries live (by default
// TemporariesAuto).
func WithTemporaries(m TemporaryMode) Option { return func(c *config) { c.temporaries = m } }

// useArenas puts the temporaries of p, opened as d, into the plan's
// arenas, as mode and the backend allow, and reports whether it did.
func useArenas(d device.Session, p *planner.Plan, mode TemporaryMode) (bool, error) {
	if mode == TemporariesPool {
		return false, nil
	}
	u, ok := d.(device.ArenaUser)
	if !ok {
		if mode == TemporariesArena {
			return false, fmt.Errorf("executor: the backend's sessions (%T) cannot hold temporaries in arenas; use the pool", d)
		}
		return false, nil
	}
	m := p.Memory
	if m == nil {
		m = memory.Of(p)
	}
	if len(m.Temporaries) == 0 {
		return false, nil
	}
	arenas := map[int]int64{}
	for _, mu := range m.Memories {
		if mu.Temporaries > 0 {
			arenas[mu.Device] = mu.ArenaBytes
		}
	}
	offsets := make([]int64, len(p.Graph.Buffers))
	for i := range offsets {
		offsets[i] = -1
	}
	for _, t := range m.Temporaries {
		offsets[t.Buffer] = t.Offset
	}
	if err := u.UseArenas(arenas, offsets); err != nil {
		if mode == TemporariesAuto {
			return false, nil
		}
		return false, fmt.Errorf("executor: place temporaries in arenas: %w", err)
	}
	return true, nil
}

// Arenas reports whether the session's temporaries live in arenas.
func (s *Session) Arenas() bool { return s.arenas }

// MemoryHighWater reports what the backend measured of the temporaries'
// memory, by memory: the most bytes they held at once since the session
// opened. In arenas that is each arena's size; in the pool, the most bytes
// allocated and not yet freed at once (on CUDA the pool's high-water mark
// over the eager runs: replays draw on graph memory, which it does not
// count). A memory the backend did not measure is absent from m; ok is
// false when it measured none. Compare it with the plan's Memory: in the
// pool a temporary counts from its Alloc to its Free, not only while its
// ops use it, so the measure may exceed the planned peak; it may fall
// short of it where the runs keep apart temporaries the plan lets overlap
// (on CUDA the pool counts in the order the steps are submitted in).
func (s *Session) MemoryHighWater() (m map[int]int64, ok bool) {
	h, ok := s.d.(device.HighWaterer)
	if !ok || s.d == nil {
		return nil, false
	}
	m = h.MemoryHighWater()
	return m, m != nil
}
