package main

import (
	"fmt"
	"io"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/trace"
)

// writeRunTrace writes the trace of the runs rs kept (of plan p, run by
// sess on the backend called backend) to --trace's file, whole or not at
// all, and its summary to summary: brief, unless -v. It returns the plan
// compared with the last traced run (nil where there is none or the cost
// model does not fit the backend) and the note on how ops were timed.
func writeRunTrace(summary io.Writer, f *runFlags, sess *executor.Session, p *planner.Plan, pm *perfModel, rs *executor.Report, backend string) (*trace.Comparison, string, error) {
	t, note := runTrace(sess, p, rs)
	if err := writeFileAtomic(f.traceFile, t.WriteChrome); err != nil {
		return nil, note, err
	}
	// Without a perf model the plan is costed by the planner's default
	// model, a GPU's: on the CPU backend every op would be "late" and every
	// overlap "lost", which says nothing about the plan.
	gpuModelOnCPU := backend == "cpu" && pm == nil
	if err := t.WriteSummaryWith(summary, trace.SummaryOptions{Brief: !f.verbose, NoEstimate: gpuModelOnCPU}); err != nil {
		return nil, note, err
	}
	writeWholeReplays(summary, rs.Whole, rs.WholeTiming, f.verbose)
	var cmp *trace.Comparison
	if !gpuModelOnCPU {
		cmp = plannedVsAchieved(p, pm, rs.Traced[0], f.graph)
	}
	switch {
	case cmp != nil && f.verbose:
		if err := cmp.Write(summary); err != nil {
			return nil, note, err
		}
	case cmp != nil:
		fmt.Fprintf(summary, "planned against achieved (%s): makespan estimated %s, measured %s; %d of %d planned overlaps lost, %s late\n",
			cmp.ModeName, human.Duration(cmp.EstimatedMakespan), human.Duration(cmp.MeasuredMakespan), cmp.Lost, cmp.Planned, human.Count(len(cmp.Late), "op", "ops"))
	}
	if !f.verbose {
		fmt.Fprintln(summary, "(-v adds the longest waits and, where the plan's costs fit the backend, the plan against the run op by op)")
	}
	fmt.Fprintf(summary, "trace of %s written to %s\n", runsText(rs.TracedRuns(), f.repeat), f.traceFile)
	return cmp, note, nil
}

// keepTrace writes the trace of the traced runs that completed before an
// interrupt to file, whole or not at all, and says so in words for the
// interrupt's message; there is no summary.
func keepTrace(file string, sess *executor.Session, p *planner.Plan, rs *executor.Report) string {
	n := len(rs.TracedRuns())
	if n == 0 {
		return "no traced run had completed, so no trace was written"
	}
	t, _ := runTrace(sess, p, rs)
	if err := writeFileAtomic(file, t.WriteChrome); err != nil {
		return fmt.Sprintf("the trace of the traced runs that completed could not be written: %v", err)
	}
	return fmt.Sprintf("the trace of the %s that completed was written to %s", human.Count(n, "traced run", "traced runs"), file)
}

// runTrace is the trace of the runs rs kept, and the note on how their
// ops were timed.
func runTrace(sess *executor.Session, p *planner.Plan, rs *executor.Report) (*trace.Trace, string) {
	t := trace.FromRuns(p, rs.Traced[0])
	note := timingNote(sess, t)
	t.Figures.WholeReplays = len(rs.Whole) > 0
	t.Figures.Replays, t.Figures.ReplayTiming = rs.Whole, rs.WholeTiming
	if l := rs.Log; l.CapturedAfter > 0 {
		t.Figures.Runs = l.String()
	}
	return t, note
}
