package main

// dagrun run --set T=512,1024,2048: each shape in turn from one session
// (job.RunShapes); here only what the command line refuses and prints.

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/spec"
)

// runShapes runs s, loaded at the first of --set's values, at each
// combination of them.
func (c *cli) runShapes(f *runFlags, s *spec.Spec) error {
	lists := f.files.lists
	what := fmt.Sprintf("--set %s with %d values", lists[0].name, len(lists[0].values))
	for flag, on := range map[string]bool{"--trace": f.traceFile != "", "--perf-model": f.perfModel != "",
		"--chaos": f.faults.chaosSet, "--fail-op": f.faults.failOp != "", "--world": f.set["world"], "--rank": f.set["rank"]} {
		if on {
			return usagef("%s runs each shape in turn; %s is for one shape: give one value", what, flag)
		}
	}
	if s.Run.World > 1 {
		return usagef("%s runs each shape in turn; %s's run.world: %d is for one shape: give one value", what, s.File, s.Run.World)
	}
	for _, out := range s.Outputs {
		if out.Save != "" {
			return usagef("%s: every shape would write output %s to %s; give one value, or drop its save path", what, out.Buffer.Name, out.Save)
		}
	}
	if len(s.Saves) > 0 {
		return usagef("%s: every shape would write %s (host step %s); give one value", what, s.Saves[0].Path, s.Saves[0].Op.Name)
	}
	if err := checkFileUses(f.fileUses(s, f.out, "", "")); err != nil {
		return err
	}
	names, values := make([]string, len(lists)), make([][]int64, len(lists))
	for i, l := range lists {
		names[i], values[i] = l.name, l.values
	}
	f.defaults(s)
	b, used, err := c.openBackend(f)
	if err != nil {
		return err
	}
	defer b.Close()
	s.Stdout = c.hostOut(f)
	ctx := c.interruptContext()
	report, err := job.RunShapes(ctx, b, s, job.ShapeValues(names, values), f.jobConfig(&runSetup{used: used}))
	if errs := spec.Errors(err); len(errs) > 0 {
		return specFailure(s, errs)
	}
	if re, ok := errors.AsType[*job.RunError](err); ok {
		return c.runFailure(ctx, s, job.Problem(s, re.Err), nil, re.Interrupted())
	}
	if err != nil {
		return err
	}
	berr := b.Close()
	report.Wait()
	if berr != nil {
		return berr
	}
	if f.format.value == "json" {
		report.Warnings = s.WarningProblems()
	}
	return c.writeReport(f, report, report.WriteText, &bytes.Buffer{})
}
