package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/plan"
	"github.com/dagrun/dagrun/planner/verify"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
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

// fuseFlag is --fuse: whether the planner fuses ops (planner.Fusion).
type fuseFlag planner.Fusion

func (f *fuseFlag) String() string { return planner.Fusion(*f).String() }

func (f *fuseFlag) Set(v string) error {
	fu, err := planner.ParseFusion(v)
	if err != nil {
		return errors.New("use auto or none")
	}
	*f = fuseFlag(fu)
	return nil
}

// layout is what the command line says about placement: --streams N (0:
// the spec's run.streams), --strategy, --objective, --memory-budget (0:
// the spec's run.memory.device) and --fuse.
type layout struct {
	streams      int
	strategy     planner.Strategy
	objective    planner.Objective
	memoryBudget int64
	fuse         planner.Fusion
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
	opts := planner.Options{Streams: s.Run.Streams, SharedCopyStreams: s.Run.SharedCopyStreams, Strategy: l.strategy, Objective: l.objective, Fuse: l.fuse}
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
		budget[plan.PinnedMemory] = m.Pinned
	}
	if m.Pageable > 0 {
		budget[plan.PageableMemory] = m.Pageable
	}
	if len(budget) == 0 {
		return nil
	}
	return budget
}

// buildPlan plans s with opts and the planner's verify pass: every plan
// the CLI prints or runs has passed verify.Verify.
func buildPlan(s *spec.Spec, opts planner.Options) (*planner.Plan, error) {
	opts.Verify = true
	p, err := planner.New(s.Graph, opts)
	if _, ok := errors.AsType[*verify.Error](err); ok {
		return nil, verifyFailure(s, err)
	}
	return p, err
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
	var fuse fuseFlag
	fs.Var(&fuse, "fuse", "")
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
	p, pm, err := c.planPerf(s, layout{streams: int(streams), strategy: planner.Strategy(strategy), objective: planner.Objective(objective), memoryBudget: int64(budget), fuse: planner.Fusion(fuse)}, pmf)
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
			if data, err = withTimesSource(data, p, pm); err != nil {
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
		if err := p.WritePasses(w); err != nil {
			return err
		}
		if pm != nil {
			_, err := fmt.Fprintln(w, pm.coverage())
			return err
		}
		return writeTimesSource(w, p)
	})
}

// withTimesSource adds to a plan's JSON whose its times are ("times":
// "default cost model (H100-class GPU)" or "perf model") and the CPU
// backend's estimate of a run.
func withTimesSource(obj []byte, p *planner.Plan, pm *perfModel) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return nil, err
	}
	src := "default cost model (H100-class GPU)"
	if pm != nil {
		src = "perf model"
	}
	fields["times"], _ = json.Marshal(src)
	fields["cpu_backend_estimate_ns"], _ = json.Marshal(int64(profile.EstimateCPU(p.Graph).Time))
	return json.Marshal(fields)
}

// writeTimesSource says whose the plan's times are, planned without a perf
// model: the default cost model's, an H100-class GPU's, not a measure of
// this machine. Where the CPU backend would take longer than longOnCPU,
// it says about how long, so a plan read on a machine without a GPU does
// not promise a GPU's milliseconds.
func writeTimesSource(w io.Writer, p *planner.Plan) error {
	if _, err := fmt.Fprintln(w, "times               the default cost model's, for an H100-class GPU, not measured here (--perf-model FILE plans with measured times)"); err != nil {
		return err
	}
	e := profile.EstimateCPU(p.Graph)
	if e.Time <= longOnCPU {
		return nil
	}
	_, err := fmt.Fprintf(w, "on the cpu backend  about %s a run, estimated from %s of GEMMs and %s moved (%s)\n",
		human.Duration(e.Time.Round(time.Second)), human.Flops(e.Flops), human.Bytes(e.Bytes), e.Rates())
	return err
}
