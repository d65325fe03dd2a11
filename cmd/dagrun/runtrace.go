package main

import (
	"fmt"
	"io"

	"github.com/dagrun/dagrun/internal/atomicfile"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/job"
)

// writeRunTrace writes the trace of the runs r kept to --trace's file,
// whole or not at all, and its summary to summary: brief, unless -v.
func writeRunTrace(summary io.Writer, f *runFlags, r *job.Report) error {
	t := r.Trace()
	if err := atomicfile.Write(f.traceFile, t.WriteChrome); err != nil {
		return err
	}
	if err := r.WriteTraceSummary(summary, t, f.verbose); err != nil {
		return err
	}
	if !f.verbose {
		fmt.Fprintln(summary, "(-v adds the longest waits and, where the plan's costs fit the backend, the plan against the run op by op)")
	}
	fmt.Fprintf(summary, "trace of %s written to %s\n", job.RunsText(r.Exec.TracedRuns(), f.repeat), f.traceFile)
	return nil
}

// keepTrace writes the trace of the traced runs that completed before an
// interrupt to file, whole or not at all, and says so in words for the
// interrupt's message; there is no summary.
func keepTrace(file string, r *job.Report) string {
	n := len(r.Exec.TracedRuns())
	if n == 0 {
		return "no traced run had completed, so no trace was written"
	}
	if err := atomicfile.Write(file, r.Trace().WriteChrome); err != nil {
		return fmt.Sprintf("the trace of the traced runs that completed could not be written: %v", err)
	}
	return fmt.Sprintf("the trace of the %s that completed was written to %s", human.Count(n, "traced run", "traced runs"), file)
}
