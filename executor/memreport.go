package executor

import (
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner/plan"
)

// MemoryReport is one memory's temporaries after a session's runs: what
// the plan said against what the backend measured.
type MemoryReport struct {
	Device int    `json:"device"` // plan.PinnedMemory, plan.PageableMemory or a device ordinal
	Memory string `json:"memory"`
	// PlannedPeakBytes is the plan's temporaries peak (plan.MemoryUse's
	// TemporaryPeak), PlannedArenaBytes its arena.
	PlannedPeakBytes  int64 `json:"planned_peak_bytes"`
	PlannedArenaBytes int64 `json:"planned_arena_bytes"`
	// PlannedSubmittedBytes is what the plan's steps allocate at once in
	// submission order (MemoryUse.SubmittedPeak): what a pool holds in an
	// eager run, so the figure a pool's measure is set against.
	PlannedSubmittedBytes int64 `json:"planned_submitted_peak_bytes"`
	// MeasuredPeakBytes is the most bytes of temporaries the backend held
	// at once: the arena's size where arenas held them, else the most
	// allocated and not yet freed at once (on CUDA the pool's high-water
	// mark over the eager runs); nil where the backend did not measure
	// this memory.
	MeasuredPeakBytes *int64 `json:"measured_peak_bytes,omitempty"`
	Arena             bool   `json:"arena"` // the temporaries lived in the arena
	// Warning says the pool held more than the plan counts (overPlan).
	Warning string `json:"warning,omitempty"`
	// measures says the backend measures some memory, if not this one
	// (CUDA: not host memories, nor the pool in replays).
	measures bool
	// persistent is the memory's persistent bytes, budget its memory
	// budget (0: none).
	persistent, budget int64
}

// MemoryReports sets the temporaries of s's plan against what s measured
// (Session.MemoryHighWater): one report per memory that holds temporaries,
// with its budget (by memory, as planner.Options.MemoryBudget). Call it
// before s closes.
func MemoryReports(s *Session, budget map[int]int64) []MemoryReport {
	m := s.p.Memory
	if m == nil {
		return nil
	}
	measured, ok := s.MemoryHighWater()
	var out []MemoryReport
	for _, u := range m.Memories {
		if u.Temporaries == 0 {
			continue
		}
		r := MemoryReport{Device: u.Device, Memory: plan.MemoryName(u.Device),
			PlannedPeakBytes: u.TemporaryPeak, PlannedArenaBytes: u.ArenaBytes, PlannedSubmittedBytes: u.SubmittedPeak,
			Arena: s.Arenas(), measures: ok, persistent: u.Persistent, budget: budget[u.Device]}
		if n, in := measured[u.Device]; in {
			r.MeasuredPeakBytes = &n
		}
		r.Warning = r.overPlan()
		out = append(out, r)
	}
	return out
}

// overPlan is the warning for a pool that held more temporaries at once
// than the plan allocates at once in step order: an alloc ran before a
// free on another stream that nothing orders before it, which the plan's
// count takes as done. Empty when the pool held no more.
func (r MemoryReport) overPlan() string {
	if r.Arena || r.MeasuredPeakBytes == nil || *r.MeasuredPeakBytes <= r.PlannedSubmittedBytes {
		return ""
	}
	return fmt.Sprintf("the pool held %s of temporaries at once, more than the %s the plan counts: an alloc ran before a free on another stream that the plan does not order before it (--temporaries arena holds the planned %s)",
		dag.FormatBytes(*r.MeasuredPeakBytes), dag.FormatBytes(r.PlannedSubmittedBytes), dag.FormatBytes(r.PlannedPeakBytes))
}

// OverBudget is the error of a memory whose persistent buffers and
// measured temporaries exceeded its budget; nil when they did not.
func (r MemoryReport) OverBudget() error {
	if r.budget <= 0 || r.MeasuredPeakBytes == nil || dag.AddSat(r.persistent, *r.MeasuredPeakBytes) <= r.budget {
		return nil
	}
	return fmt.Errorf("memory %s: the run held %s of temporaries beside %s of persistent buffers, over the memory budget of %s (use --temporaries arena, which holds the planned %s, or raise the budget)",
		r.Memory, dag.FormatBytes(*r.MeasuredPeakBytes), dag.FormatBytes(r.persistent), dag.FormatBytes(r.budget), dag.FormatBytes(r.PlannedPeakBytes))
}

// String says r in a line: the planned peak and arena against what was
// measured, and how.
func (r MemoryReport) String() string {
	got := "not measured by this backend"
	if r.measures {
		got = "not measured"
	}
	if r.MeasuredPeakBytes != nil {
		how := "at most live at once"
		if r.Arena {
			how = "arena"
		}
		got = fmt.Sprintf("%s (%s)", dag.FormatBytes(*r.MeasuredPeakBytes), how)
	}
	pool := ""
	if !r.Arena && r.PlannedSubmittedBytes != r.PlannedPeakBytes {
		// A pool holds what the steps allocate at once as they are
		// submitted, which the plan's order sets.
		pool = fmt.Sprintf(", %s allocated at once in step order", dag.FormatBytes(r.PlannedSubmittedBytes))
	}
	return fmt.Sprintf("memory %s: temporaries planned peak %s, arena %s%s; measured %s",
		r.Memory, dag.FormatBytes(r.PlannedPeakBytes), dag.FormatBytes(r.PlannedArenaBytes), pool, got)
}
