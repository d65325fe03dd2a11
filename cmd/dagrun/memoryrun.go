package main

import (
	"fmt"
	"io"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// memoryReport is one memory's temporaries in dagrun run's summary: what
// the plan said against what the backend measured.
type memoryReport struct {
	Device int    `json:"device"` // -1: pinned host memory, -2: pageable host memory
	Memory string `json:"memory"`
	// PlannedPeakBytes is the plan's temporaries peak (planner.MemoryUse's
	// TemporaryPeak), PlannedArenaBytes its arena.
	PlannedPeakBytes  int64 `json:"planned_peak_bytes"`
	PlannedArenaBytes int64 `json:"planned_arena_bytes"`
	// MeasuredPeakBytes is the most bytes of temporaries the backend held
	// at once (the arena's size where arenas held them); absent where the
	// backend does not measure it.
	MeasuredPeakBytes *int64 `json:"measured_peak_bytes,omitempty"`
	Arena             bool   `json:"arena"` // the temporaries lived in the arena
}

// memoryReports sets the plan's temporaries against what sess measured:
// one report per memory that holds temporaries.
func memoryReports(sess *executor.Session, p *planner.Plan) []memoryReport {
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
		r := memoryReport{Device: u.Device, Memory: planner.MemoryName(u.Device),
			PlannedPeakBytes: u.TemporaryPeak, PlannedArenaBytes: u.ArenaBytes, Arena: sess.Arenas()}
		if ok {
			n := measured[u.Device]
			r.MeasuredPeakBytes = &n
		}
		out = append(out, r)
	}
	return out
}

// writeMemoryReports writes one line per memory of rs.
func writeMemoryReports(w io.Writer, rs []memoryReport) {
	for _, r := range rs {
		got := "not measured by this backend"
		if r.MeasuredPeakBytes != nil {
			how := "at most live at once"
			if r.Arena {
				how = "arena"
			}
			got = fmt.Sprintf("%s (%s)", dag.FormatBytes(*r.MeasuredPeakBytes), how)
		}
		fmt.Fprintf(w, "memory %s: temporaries planned peak %s, arena %s; measured %s\n",
			r.Memory, dag.FormatBytes(r.PlannedPeakBytes), dag.FormatBytes(r.PlannedArenaBytes), got)
	}
}
