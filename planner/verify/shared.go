package verify

import (
	"fmt"

	"github.com/dagrun/dagrun/planner/plan"
)

// Shared proves that the plans of several shapes of one program may keep
// their temporaries in one arena per memory, of the sizes arenas gives
// (by memory), as the executor's Shapes keeps them: each plan passes
// Verify, so within its runs its temporaries share bytes only where it
// orders every use of one before every use of the other and every use
// lies between the temporary's Alloc and Free; and every temporary it
// places fits its memory's shared arena. Nothing more is needed across
// plans: a temporary lives inside one run (Verify's lifetimes; dag refuses
// a read of bytes the run has not written, unless the buffer is declared
// uninitialised), and the Shapes runs one shape at a time, each run to its
// end, so temporaries of two plans are never live at once whatever bytes
// they share. The error, a *Error, names the plan by its place in plans.
func Shared(arenas map[int]int64, plans ...*plan.Plan) error {
	for i, p := range plans {
		if err := Verify(p); err != nil {
			return fmt.Errorf("plan %d: %w", i, err)
		}
		m := p.Memory
		if m == nil {
			continue // its temporaries are not in arenas
		}
		for _, u := range m.Memories {
			if size, ok := arenas[u.Device]; u.Temporaries > 0 && (!ok || u.ArenaBytes > size) {
				return &Error{Kind: ArenaOverlap, Msg: fmt.Sprintf("plan %d needs an arena of %d bytes in %s, and the shared one has %d",
					i, u.ArenaBytes, plan.MemoryName(u.Device), size)}
			}
		}
		for _, t := range m.Temporaries {
			size, ok := arenas[t.Device]
			if !ok || t.Offset < 0 || t.Offset > size || t.Bytes > size-t.Offset {
				return &Error{Kind: ArenaOverlap, Msg: fmt.Sprintf("plan %d places temporary %s at [%d, %d+%d), outside the shared arena of %d bytes in %s",
					i, p.Graph.Buffers[t.Buffer].Name, t.Offset, t.Offset, t.Bytes, size, plan.MemoryName(t.Device))}
			}
		}
	}
	return nil
}
