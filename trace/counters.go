package trace

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// Counter is one sample of a memory's counter track: the bytes of
// temporaries the plan has allocated in the memory from At on. Each Alloc
// op's slice adds its buffer's bytes at its start, each Free op's slice
// takes them away at its end; with arenas, whose Allocs and Frees do
// nothing, the track is the planned occupancy of the arena, counted the
// same way.
type Counter struct {
	Memory int           // a device ordinal, plan.PinnedMemory or plan.PageableMemory
	At     time.Duration // as Slice.Start
	Bytes  int64         // the temporaries' bytes from At on
}

// counterName is the name of memory m's counter track in a Chrome trace:
// "memory dev0", "memory pinned", "memory pageable".
func counterName(m int) string {
	switch m {
	case plan.PinnedMemory:
		return "memory pinned"
	case plan.PageableMemory:
		return "memory pageable"
	}
	return fmt.Sprintf("memory dev%d", m)
}

// parseCounterName is counterName's inverse.
func parseCounterName(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "memory ")
	if !ok {
		return 0, false
	}
	switch rest {
	case "pinned":
		return plan.PinnedMemory, true
	case "pageable":
		return plan.PageableMemory, true
	}
	if d, ok := strings.CutPrefix(rest, "dev"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && strconv.Itoa(n) == d {
			return n, true
		}
	}
	return 0, false
}

// counterPid is the Chrome process a memory's counter track is drawn in:
// its device's, or process 0 for host memory.
func counterPid(m int) int {
	if m < 0 {
		return 0
	}
	return m + 1
}

// memoryCounters works out the counter tracks of the trace's slices: by
// memory, then time; changes at one time make one sample.
func memoryCounters(ops []*dag.Op, ss []Slice) []Counter {
	type change struct {
		mem   int
		at    time.Duration
		bytes int64
	}
	var changes []change
	for _, s := range ss {
		if s.Op < 0 || s.Op >= len(ops) || ops[s.Op] == nil {
			continue
		}
		op := ops[s.Op]
		life := op.Kind.Info().Lifetime
		if life == dag.NoLifetime {
			continue
		}
		buf := op.Buffer()
		if buf == nil {
			continue
		}
		m := buf.Device
		switch buf.Placement {
		case dag.Pinned:
			m = plan.PinnedMemory
		case dag.Pageable:
			m = plan.PageableMemory
		}
		if life == dag.Allocates {
			changes = append(changes, change{m, s.Start, buf.Size})
		} else {
			changes = append(changes, change{m, s.End(), -buf.Size})
		}
	}
	slices.SortStableFunc(changes, func(a, b change) int { return cmp.Or(cmp.Compare(a.mem, b.mem), cmp.Compare(a.at, b.at)) })
	var out []Counter
	var live int64
	for i, c := range changes {
		if i == 0 || c.mem != changes[i-1].mem {
			live = 0
		}
		live += c.bytes
		if n := len(out); n > 0 && out[n-1].Memory == c.mem && out[n-1].At == c.at {
			out[n-1].Bytes = live
			continue
		}
		out = append(out, Counter{Memory: c.mem, At: c.at, Bytes: live})
	}
	return out
}

// counterArgs are a counter event's args.
type counterArgs struct {
	Temporaries *int64 `json:"temporaries"`
}
