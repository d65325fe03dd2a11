package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/progress"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/job"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// layout is the placement the flags ask for.
func (f *runFlags) layout() job.Layout {
	return job.Layout{Streams: int(f.streams), Strategy: planner.Strategy(f.strategy), MemoryBudget: int64(f.memoryBudget),
		PoolTemporaries: f.temps.value == "pool", Fuse: f.fuse, Split: f.split}
}

// runFlags are dagrun run's flags.
type runFlags struct {
	backend      *oneOf
	noPeer       bool // --no-peer: copies between devices through host memory
	streams      streamsFlag
	strategy     strategyFlag
	fuse         planner.Fusion
	split        planner.Splitting
	memoryBudget sizeFlag // --memory-budget: every device's (plan.go)
	repeat       int
	graph        bool // every run a replay: graphMode is always
	graphMode    graphFlag
	traceFile    string
	traceRuns    string
	detail       *oneOf // --trace-detail
	temps        *oneOf // --temporaries
	perfModel    string // perfmodel.go
	timing       *oneOf
	format       *oneOf
	out          string
	verbose      bool // -v
	files        specFiles
	faults       faults
	ranking      rankFlags // ranks.go
	set          map[string]bool
}

func parseRunFlags(args []string) (*runFlags, []string, error) {
	f := &runFlags{backend: backendFlag(), format: &oneOf{value: "text", choices: []string{"text", "json"}},
		timing: &oneOf{value: "auto", choices: []string{"auto", "cupti", "events"}},
		detail: &oneOf{value: "ops", choices: []string{"ops", "replays"}},
		temps:  &oneOf{value: "auto", choices: []string{"auto", "pool", "arena"}}}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.Var(f.backend, "backend", "")
	fs.BoolVar(&f.noPeer, "no-peer", false, "")
	fs.Var(&f.streams, "streams", "")
	fs.Var(&f.strategy, "strategy", "")
	fs.TextVar(&f.fuse, "fuse", planner.FuseAuto, "")
	fs.TextVar(&f.split, "split", planner.SplitAuto, "")
	fs.Var(&f.memoryBudget, "memory-budget", "")
	fs.IntVar(&f.repeat, "repeat", 0, "")
	fs.Var(&f.graphMode, "graph", "")
	fs.StringVar(&f.traceFile, "trace", "", "")
	fs.StringVar(&f.traceRuns, "trace-runs", "", "")
	fs.Var(f.detail, "trace-detail", "")
	fs.Var(f.temps, "temporaries", "")
	fs.StringVar(&f.perfModel, "perf-model", "", "")
	fs.Var(f.timing, "timing", "")
	fs.Var(f.format, "format", "")
	fs.BoolFunc("json", "", func(v string) error {
		on, err := strconv.ParseBool(v)
		if err == nil && on {
			f.format.value = "json"
		}
		return err
	})
	fs.StringVar(&f.out, "o", "", "")
	fs.BoolVar(&f.verbose, "v", false, "")
	f.files.addFlags(fs)
	f.faults.addFlags(fs)
	f.ranking.addFlags(fs)
	specs, err := parseFlags(fs, joinGraphMode(args))
	if err != nil {
		return nil, nil, err
	}
	f.set = setFlags(fs)
	return f, specs, nil
}

func (c *cli) run(args []string) error {
	f, specs, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	if len(specs) != 1 {
		return usagef("give one spec file (- for standard input)")
	}
	if f.set["repeat"] && f.repeat < 1 {
		return usagef("--repeat %d: run at least once", f.repeat)
	}
	if f.traceRuns != "" && f.traceFile == "" {
		return usagef("--trace-runs chooses the runs --trace keeps; add --trace FILE")
	}
	if f.set["trace-detail"] && f.traceFile == "" {
		return usagef("--trace-detail chooses what --trace keeps of each replay; add --trace FILE")
	}
	asJSON := f.format.value == "json"
	c.jsonErrors = asJSON

	f.files.shapes = true
	s, err := c.load(specs[0], f.files)
	if err != nil {
		return err
	}
	if !asJSON {
		c.printWarnings(s)
	}
	if len(f.files.lists) > 0 {
		return c.runShapes(f, s) // shapes.go: several values, one shape each
	}
	if err := f.faults.check(s); err != nil {
		return err
	}
	f.defaults(s)
	// Replays traced whole need replays asked for: --graph, --graph auto
	// given explicitly, or run.graph: true.
	if f.detail.value == "replays" && !f.graph && !(f.set["graph"] && f.graphMode.mode == executor.GraphAuto) {
		return usagef("--trace-detail replays traces graph replays whole; add --graph (or run.graph: true)")
	}
	m, err := f.rankMode(s, os.Getenv)
	if err != nil {
		return err
	}
	su, err := c.openRun(f, specs[0], s, m) // runsetup.go
	if err != nil {
		return err
	}
	defer su.b.Close() // after the session's Close below; its errors are the session's
	if m != nil {
		return c.runRanks(f, su, m)
	}
	prog := su.progs[0]
	s.Stdout = c.hostOut(f)
	ctx := c.interruptContext()
	cfg := f.jobConfig(su)
	cfg.Progress = func() *progress.Bar { return c.newProgress(f.repeat, c.quietProgress(asJSON, prog.Plan)) }
	report, err := job.Run(ctx, su.b, prog, cfg)
	if re, ok := errors.AsType[*job.RunError](err); ok {
		at := re.Interrupted()
		if ctx.Err() != nil && f.traceFile != "" && re.Traced {
			at += "; " + keepTrace(f.traceFile, report)
		}
		return c.runFailure(ctx, s, job.Problem(s, re.Err), report.Outputs, at)
	}
	// The outputs' checksums were computed beside the session's Close and
	// are waited for beside the backend's.
	berr := su.b.Close()
	report.Wait()
	if berr != nil {
		return berr
	}
	if l := report.Exec.Log; l.NotCaptured != nil && l.CapturedAfter == 0 && f.verbose {
		why := strings.ReplaceAll(l.NotCaptured.Error(), "\n", "; ")
		fmt.Fprintf(c.stderr, "dagrun run: --graph auto: the runs stay eager, the plan cannot be captured: %s\n", why)
	}
	if asJSON {
		report.Warnings = s.WarningProblems()
	}
	var memErr error
	for _, r := range report.Memory {
		if r.Warning != "" {
			fmt.Fprintf(c.stderr, "dagrun run: warning: memory %s: %s\n", r.Memory, r.Warning)
		}
		if err := r.OverBudget(); err != nil && memErr == nil {
			memErr = err
		}
	}
	var traceSummary bytes.Buffer
	if f.traceFile != "" {
		if err := writeRunTrace(&traceSummary, f, report); err != nil {
			return err
		}
	}
	if prog.Model != nil { // after the comparison with the plan, which uses the model as planned
		if err := report.SaveModel(prog); err != nil {
			return err
		}
	}
	for _, u := range report.Unfused {
		fmt.Fprintf(c.stderr, "dagrun run: note: %s\n", u)
	}
	// The cpu backend has one clock: how it timed ops is news only with -v.
	if note := report.Timing.Note(); note != "" && (!f.graph || f.traceFile != "") && (su.used != "cpu" || f.verbose) {
		fmt.Fprintf(c.stderr, "dagrun run: %s\n", note)
	}
	text := func(w io.Writer) error { return report.WriteText(w, prog.Model) }
	if err := c.writeReport(f, report, text, &traceSummary); err != nil {
		return err
	}
	return memErr // after the report, which shows what was measured
}

// writeReport writes a run's report to -o: as JSON with --format json,
// with the trace summary (text) on stderr, else as text, followed by the
// summary.
func (c *cli) writeReport(f *runFlags, doc any, text func(io.Writer) error, summary *bytes.Buffer) error {
	if f.format.value == "json" {
		if _, err := summary.WriteTo(c.stderr); err != nil {
			return err
		}
		return c.writeOutput(f.out, func(w io.Writer) error { return writeJSON(w, doc) })
	}
	return c.writeOutput(f.out, func(w io.Writer) error {
		if err := text(w); err != nil {
			return err
		}
		_, err := summary.WriteTo(w)
		return err
	})
}

// defaults fills in what the flags leave to the spec s: the backend, the
// runs and the graph mode.
func (f *runFlags) defaults(s *spec.Spec) {
	if f.backend.value == "" {
		f.backend.value = s.Run.Backend
	}
	if f.repeat == 0 {
		f.repeat = s.Run.Repeat
	}
	if !f.set["graph"] {
		f.graphMode.mode = job.GraphMode(s)
	}
	f.graph = f.graphMode.mode == executor.GraphAlways
}

// jobConfig is how the flags say a run's programs run: the graph mode,
// the runs traced and how, where temporaries live, the faults.
func (f *runFlags) jobConfig(su *runSetup) job.Config {
	cfg := job.Config{Backend: su.used, Layout: f.layout(), Repeat: f.repeat, Graph: f.graphMode.mode,
		Traced: su.traced, WholeReplays: f.detail.value == "replays", TimingSource: f.timing.value, Options: su.faults}
	if mode, ok := executor.ParseTemporaryMode(f.temps.value); ok {
		cfg.Temporaries = mode
	}
	return cfg
}

// runFailure is the failure of a run: interrupted (status 130) when a
// signal ended ctx, said in plain words with how far the runs came (at,
// RunError.Interrupted), else p, the op's or backend's error placed in s;
// it names the outputs with a save path that were not written.
func (c *cli) runFailure(ctx context.Context, s *spec.Spec, p problem, outs []spec.OutputResult, at string) error {
	fl := &failure{status: exitFailure, errors: []problem{p}}
	if ctx.Err() != nil {
		fl = &failure{status: exitInterrupted, errors: []problem{{File: s.File, Message: at}}}
	}
	for i, out := range s.Outputs {
		if out.Save != "" && (i >= len(outs) || outs[i].Saved == "") {
			fl.notWritten = append(fl.notWritten, fmt.Sprintf("%s to %s", out.Buffer.Name, human.Quote(s.SavePath(out.Save))))
		}
	}
	return fl
}

// quietProgress reports whether a run must draw no progress bar: JSON is
// for programs, and lines that host steps print to the terminal the bar is
// on would be torn by it.
func (c *cli) quietProgress(asJSON bool, p *planner.Plan) bool {
	if asJSON {
		return true
	}
	hostSteps := slices.ContainsFunc(p.Graph.Ops, func(op *dag.Op) bool { return op.Kind == dag.Host })
	return hostSteps && c.isTerminal(c.stdout)
}
