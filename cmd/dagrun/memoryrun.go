package main

import (
	"fmt"
	"io"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
)

// memoryReport is one memory's temporaries in dagrun run's summary: what
// the plan said against what the backend measured.
type memoryReport struct {
	Device int    `json:"device"` // -1: pinned host memory, -2: pageable host memory
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
	// mark over the eager runs); absent where the backend did not measure
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

// overPlan is the warning for a pool that held more temporaries at once
// than the plan allocates at once in step order: an alloc ran before a
// free on another stream that nothing orders before it, which the plan's
// count takes as done. Empty when the pool held no more.
func (r memoryReport) overPlan() string {
	if r.Arena || r.MeasuredPeakBytes == nil || *r.MeasuredPeakBytes <= r.PlannedSubmittedBytes {
		return ""
	}
	return fmt.Sprintf("the pool held %s of temporaries at once, more than the %s the plan counts: an alloc ran before a free on another stream that the plan does not order before it (--temporaries arena holds the planned %s)",
		dag.FormatBytes(*r.MeasuredPeakBytes), dag.FormatBytes(r.PlannedSubmittedBytes), dag.FormatBytes(r.PlannedPeakBytes))
}

// overBudget is the error of a memory whose persistent buffers and
// measured temporaries exceeded its budget; nil when they did not.
func (r memoryReport) overBudget() error {
	if r.budget <= 0 || r.MeasuredPeakBytes == nil || dag.AddSat(r.persistent, *r.MeasuredPeakBytes) <= r.budget {
		return nil
	}
	return fmt.Errorf("memory %s: the run held %s of temporaries beside %s of persistent buffers, over the memory budget of %s (use --temporaries arena, which holds the planned %s, or raise the budget)",
		r.Memory, dag.FormatBytes(*r.MeasuredPeakBytes), dag.FormatBytes(r.persistent), dag.FormatBytes(r.budget), dag.FormatBytes(r.PlannedPeakBytes))
}

// memoryReports sets the plan's temporaries against what sess measured:
// one report per memory that holds temporaries, with its budget (by
// memory, as planner.MemoryBudget).
func memoryReports(sess *executor.Session, p *planner.Plan, budget map[int]int64) []memoryReport {
	m := p.Memory
	if m == nil {
		return nil
	}
	measured, ok := sess.MemoryHighWater()
	var out []memoryReport
	for _, u := range m.Memories {
		if u.Temporaries == 0 {
			continue
		}
		r := memoryReport{Device: u.Device, Memory: plan.MemoryName(u.Device),
			PlannedPeakBytes: u.TemporaryPeak, PlannedArenaBytes: u.ArenaBytes, PlannedSubmittedBytes: u.SubmittedPeak,
			Arena: sess.Arenas(), measures: ok, persistent: u.Persistent, budget: budget[u.Device]}
		if n, in := measured[u.Device]; in {
			r.MeasuredPeakBytes = &n
		}
		r.Warning = r.overPlan()
		out = append(out, r)
	}
	return out
}

// writeMemoryReports writes one line per memory of rs.
func writeMemoryReports(w io.Writer, rs []memoryReport) {
	for _, r := range rs {
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
		fmt.Fprintf(w, "memory %s: temporaries planned peak %s, arena %s%s; measured %s\n",
			r.Memory, dag.FormatBytes(r.PlannedPeakBytes), dag.FormatBytes(r.PlannedArenaBytes), pool, got)
	}
}

// budgetReport is what meeting the memory budget cost the plan
// (plan.Budget), in dagrun run's summary.
type budgetReport struct {
	Orderings       int   `json:"orderings"`    // pairs of temporaries ordered
	Dependencies    int   `json:"dependencies"` // dependencies added between their uses
	EstMakespanNS   int64 `json:"est_makespan_ns"`
	UnconstrainedNS int64 `json:"unconstrained_est_makespan_ns"` // the plan's estimate without the budget
}

func newBudgetReport(p *planner.Plan) *budgetReport {
	b := p.Budget
	if b == nil {
		return nil
	}
	return &budgetReport{Orderings: b.Orderings, Dependencies: b.Dependencies,
		EstMakespanNS: int64(p.Stats.Makespan), UnconstrainedNS: int64(b.Unconstrained)}
}

// writeBudgetReport writes what the budget cost, if anything.
func writeBudgetReport(w io.Writer, b *budgetReport) {
	if b == nil {
		return
	}
	ratio := "no estimate"
	if b.UnconstrainedNS > 0 {
		ratio = fmt.Sprintf("%.2fx", float64(b.EstMakespanNS)/float64(b.UnconstrainedNS))
	}
	fmt.Fprintf(w, "memory budget: %s of temporaries ordered; estimated makespan %s against %s without it (%s)\n",
		human.Count(b.Orderings, "pair", "pairs"), short(b.EstMakespanNS), short(b.UnconstrainedNS), ratio)
}
