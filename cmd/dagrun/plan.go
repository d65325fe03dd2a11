package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

const planUsage = `usage: dagrun plan spec.yaml [--format text|json|dot] [-o FILE] [--streams N] [--strategy S] [--memory-budget SIZE] [--compare]

Plan prints how dagrun would run a spec, without running it: each stream's
instructions in order (launch, copy, fill, alloc, free, record and wait on
events) and the plan's figures (ops, streams per device and priority,
cross-stream edges, waits inserted, estimated makespan against the
critical-path bound). The plan is verified first (every conflicting pair
of ops ordered, every dependency kept); a plan that fails is an internal
error (exit status 3). A spec named - is read from standard input.

Flags:
	--format F       text (default), json, or dot (Graphviz: ops as nodes,
	                 one cluster per stream, waits as edges)
	-o FILE          write to FILE (written whole, or not at all) instead
	                 of standard output
	--streams N      compute streams per device and priority, 1 to 32
	                 (default: the spec's run.streams, else 4)
	--strategy S     how ops are ordered for placement: list (default:
	                 list scheduling), declared (declaration order, the
	                 old placement) or best (the shorter estimate)
	--memory-budget SIZE
	                 the most each device's memory may hold (persistent
	                 buffers and the temporaries' arena), as specs write
	                 sizes (40GiB; a bare number is bytes); overrides
	                 run.memory.device. The planner orders temporaries to
	                 keep within it and prints what that cost in estimated
	                 makespan; a budget no order meets is an error
	--set NAME=VALUE give the spec's parameter NAME this value (more than once for several)
	--allow-path DIR let the spec read and write files under DIR too
	                 (repeatable)
	--save-dir DIR   check save paths as dagrun run --save-dir DIR would
	--compare        print each placement strategy's estimated makespan
	                 (for an eager run and a graph replay) and wait count
	                 instead of the plan
	--perf-model F   cost ops with the measurements in the perf-model file
	                 F (dagrun run --perf-model writes it) of the device
	                 --backend names, and say how many ops were costed
	                 from measurements; a file of another device, version,
	                 or a corrupt one is a warning, and default costs
	--backend B      the device whose perf model to use: auto (default:
	                 cuda when there is one, else cpu), cpu or cuda
	--graph          estimate the makespan of a graph replay, not of an
	                 eager run (with --perf-model)
`

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

// layout is what the command line says about placement: --streams N (0:
// the spec's run.streams), --strategy and --memory-budget (0: the spec's
// run.memory.device).
type layout struct {
	streams      int
	strategy     planner.Strategy
	memoryBudget int64
	// poolTemporaries: dagrun run --temporaries pool, planned so that the
	// pool holds about the planned peak (planner.Options.PoolTemporaries).
	poolTemporaries bool
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
func makePlan(s *spec.Spec, l layout) (*planner.Plan, error) {
	return buildPlan(s, planOptions(s, l))
}

// planOptions are the planner's options for spec s: its run section, with
// --streams N (when not 0) over its stream budget, and --strategy.
func planOptions(s *spec.Spec, l layout) planner.Options {
	opts := planner.Options{Streams: s.Run.Streams, SharedCopyStreams: s.Run.SharedCopyStreams, Strategy: l.strategy}
	if l.streams != 0 {
		opts.Streams = l.streams
	}
	opts.MemoryBudget = memoryBudget(s, l)
	opts.PoolTemporaries = l.poolTemporaries
	return opts
}

// memoryBudget is the planner's memory budget for s: --memory-budget (else
// run.memory.device) for every device the graph uses, and run.memory's
// pinned and pageable budgets; nil for none.
func memoryBudget(s *spec.Spec, l layout) map[int]int64 {
	m := s.Run.Memory
	device := m.Device
	if l.memoryBudget != 0 {
		device = l.memoryBudget
	}
	budget := map[int]int64{}
	if device > 0 && s.Graph != nil {
		for _, b := range s.Graph.Buffers {
			if b != nil && b.Placement == dag.Device {
				budget[b.Device] = device
			}
		}
		for _, op := range s.Graph.Ops {
			if op != nil && op.Device >= 0 {
				budget[op.Device] = device
			}
		}
	}
	if m.Pinned > 0 {
		budget[planner.PinnedMemory] = m.Pinned
	}
	if m.Pageable > 0 {
		budget[planner.PageableMemory] = m.Pageable
	}
	if len(budget) == 0 {
		return nil
	}
	return budget
}

// buildPlan plans s with opts and verifies the plan: every plan the CLI
// prints or runs has passed planner.Verify.
func buildPlan(s *spec.Spec, opts planner.Options) (*planner.Plan, error) {
	p, err := planner.New(s.Graph, opts)
	if err != nil {
		return nil, err
	}
	if err := planner.Verify(p); err != nil {
		return nil, verifyFailure(s, err)
	}
	return p, nil
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
	if err := checkFileUses(specUses(s, nil, []fileUse{{*out, "-o"}})); err != nil {
		return err
	}
	if *compare {
		return c.writeOutput(*out, func(w io.Writer) error { return writeComparison(w, s, layout{streams: int(streams)}) })
	}
	p, pm, err := c.planPerf(s, layout{streams: int(streams), strategy: planner.Strategy(strategy), memoryBudget: int64(budget)}, pmf)
	if err != nil {
		return err
	}
	return c.writeOutput(*out, func(w io.Writer) error {
		switch format.value {
		case "json":
			data, err := p.MarshalJSON()
			if err != nil {
				return err
			}
			if data, err = withSchemaVersion(data); err != nil {
				return err
			}
			if data, err = withPerfModel(data, pm); err != nil {
				return err
			}
			var b bytes.Buffer
			if err := json.Indent(&b, data, "", "  "); err != nil {
				return err
			}
			b.WriteByte('\n')
			_, err = b.WriteTo(w)
			return err
		case "dot":
			return trace.PlanDOT(w, p)
		}
		if err := p.WriteText(w); err != nil {
			return err
		}
		if pm != nil {
			_, err := fmt.Fprintln(w, pm.coverage())
			return err
		}
		return nil
	})
}
