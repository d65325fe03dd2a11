package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/spec"
)

// streamsFlag is --streams: 0 (not given) or 1..32.
type streamsFlag int

func (s *streamsFlag) String() string { return "" }

func (s *streamsFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > planner.MaxStreams {
		return fmt.Errorf("use 1 to %d", planner.MaxStreams)
	}
	*s = streamsFlag(n)
	return nil
}

// strategyFlag is --strategy: the planner's placement strategy.
type strategyFlag planner.Strategy

func (s *strategyFlag) String() string { return planner.Strategy(*s).String() }

func (s *strategyFlag) Set(v string) error {
	st, err := planner.ParseStrategy(v)
	if err != nil {
		return errors.New("use list, declared or best")
	}
	*s = strategyFlag(st)
	return nil
}

// objectiveFlag is --objective: what the planner optimises for.
type objectiveFlag planner.Objective

func (o *objectiveFlag) String() string { return planner.Objective(*o).String() }

func (o *objectiveFlag) Set(v string) error {
	ob, err := planner.ParseObjective(v)
	if err != nil {
		return errors.New("use makespan, memory or streams")
	}
	*o = objectiveFlag(ob)
	return nil
}

// sizeFlag is a size flag: a byte count, with a unit as specs write sizes
// or without one (bytes); at least one byte.
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeFlag) Set(v string) error {
	n, err := spec.ParseSize(v)
	if err != nil || n < 1 {
		return errors.New("give a size of at least one byte: 40GiB, \"40 GiB\", or a bare number of bytes")
	}
	*s = sizeFlag(n)
	return nil
}

// makePlan plans s with its run settings and the command line's layout
// over them, and verifies the plan: a plan that fails is a bug, reported
// as an internal error.
func makePlan(s *spec.Spec, l job.Layout) (*planner.Plan, error) {
	p, err := job.Plan(s, l.PlanOptions(s)...)
	return p, planFailure(s, err)
}

// planFailure is err, a plan's error, as the command's failure: verify.Verify
// refusing it is an internal error.
func planFailure(s *spec.Spec, err error) error {
	if _, ok := errors.AsType[*verify.Error](err); ok {
		return verifyFailure(s, err)
	}
	return err
}

func (c *cli) plan(args []string) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	format := &oneOf{value: "text", choices: []string{"text", "json", "dot"}}
	fs.Var(format, "format", "")
	out := fs.String("o", "", "")
	var streams streamsFlag
	fs.Var(&streams, "streams", "")
	var strategy strategyFlag
	fs.Var(&strategy, "strategy", "")
	var objective objectiveFlag
	fs.Var(&objective, "objective", "")
	var fuse planner.Fusion
	fs.TextVar(&fuse, "fuse", planner.FuseAuto, "")
	var split planner.Splitting
	fs.TextVar(&split, "split", planner.SplitAuto, "")
	var budget sizeFlag
	fs.Var(&budget, "memory-budget", "")
	compare := fs.Bool("compare", false, "")
	var pmf planPerfFlags // perfmodel.go
	pmf.addFlags(fs)
	var files specFiles
	files.addFlags(fs)
	specs, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(specs) != 1 {
		return usagef("give one spec file (- for standard input)")
	}
	c.jsonErrors = format.value == "json"
	s, err := c.load(specs[0], files)
	if err != nil {
		return err
	}
	c.printWarnings(s)
	if err := checkFileUses(outputUses(s, *out)); err != nil {
		return err
	}
	if *compare {
		return c.writeOutput(*out, func(w io.Writer) error {
			return planFailure(s, job.WriteComparison(w, s, job.Layout{Streams: int(streams), Fuse: fuse, Split: split}))
		})
	}
	p, pm, err := c.planPerf(s, job.Layout{Streams: int(streams), Strategy: planner.Strategy(strategy), Objective: planner.Objective(objective), MemoryBudget: int64(budget), Fuse: fuse, Split: split}, pmf)
	if err != nil {
		return err
	}
	return c.writeOutput(*out, func(w io.Writer) error { return job.WritePlan(w, p, pm, format.value) })
}
