package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
)

// layout is the placement the flags ask for.
func (f *runFlags) layout() layout {
	return layout{streams: int(f.streams), strategy: planner.Strategy(f.strategy), memoryBudget: int64(f.memoryBudget),
		poolTemporaries: f.temps.value == "pool", fuse: planner.Fusion(f.fuse)}
}

// runFlags are dagrun run's flags.
type runFlags struct {
	backend      *oneOf
	noPeer       bool // --no-peer: copies between devices through host memory
	streams      streamsFlag
	strategy     strategyFlag
	fuse         fuseFlag // plan.go
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
	fs.Var(&f.fuse, "fuse", "")
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

// timingSource is the timing source the session is asked for: --timing's,
// except that whole replays (--trace-detail replays) are timed by CUPTI's
// graph-level records unless events were asked for.
func (f *runFlags) timingSource() string {
	if f.detail.value == "replays" && f.timing.value != "events" {
		return "cupti-graph"
	}
	return f.timing.value
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

	var src []byte // a spec from standard input, which ranks load again
	if specs[0] == stdio {
		if src, err = io.ReadAll(io.LimitReader(c.stdin, maxStdinSpec+1)); err != nil {
			return fmt.Errorf("reading the spec from standard input: %w", err)
		}
		c.stdin = bytes.NewReader(src)
	}
	s, err := c.load(specs[0], f.files)
	if err != nil {
		return err
	}
	if !asJSON {
		c.printWarnings(s)
	}
	if err := f.faults.check(s); err != nil {
		return err
	}
	if f.backend.value == "" {
		f.backend.value = s.Run.Backend
	}
	if f.repeat == 0 {
		f.repeat = s.Run.Repeat
	}
	f.graphMode.mode = graphModeOf(f.graphMode.mode, f.set["graph"], s.Run.Graph, s.Run.GraphSet) // graphflag.go
	f.graph = f.graphMode.mode == executor.GraphAlways
	// Replays traced whole need replays asked for: --graph, --graph auto
	// given explicitly, or run.graph: true.
	if f.detail.value == "replays" && !f.graph && !(f.set["graph"] && f.graphMode.mode == executor.GraphAuto) {
		return usagef("--trace-detail replays traces graph replays whole; add --graph (or run.graph: true)")
	}
	m, err := f.rankMode(s, os.Getenv)
	if err != nil {
		return err
	}
	su, err := c.openRun(f, specs[0], src, s, m) // runsetup.go
	if err != nil {
		return err
	}
	defer su.b.Close() // after the session's Close below; its errors are the session's
	if m != nil {
		return c.runRanks(f, su, m)
	}
	p, pm := su.ranks[0].p, su.ranks[0].pm
	s.Stdout = c.hostOut(f)
	ctx := c.interruptContext()
	// --graph auto: the runs after a few identical ones replay a graph. A
	// perf model's eager runs teach it the host's submission costs, so
	// they stay eager.
	auto := f.graphMode.mode == executor.GraphAuto && pm == nil && f.repeat > executor.DefaultAutoCapture
	bar := c.newProgress(f.repeat, c.quietProgress(asJSON, p))
	rn, err := executor.NewRunner(ctx, su.b, p, c.runnerOptions(f, su, pm, auto, bar)...)
	if err != nil {
		return c.runFailure(ctx, s, err, nil, interruptedAt{})
	}
	rep, err := rn.Run(ctx, f.repeat)
	bar.clear()
	saved := map[string]bool{}
	var report runReport
	var sums *pendingSums
	if err == nil {
		report = newRunReport(p, rep)
		report.Outputs, sums, err = readOutputs(s, rn.Session(0).Read, saved)
		report.Saves = hostSaves(s)
		report.Memory = memoryReports(rn.Session(0), p, memoryBudget(s, f.layout())) // memoryrun.go; before Close
		report.MemoryBudget = newBudgetReport(p)
	}
	if cerr := rn.Close(); err == nil {
		err = cerr
	}
	if err == nil && pm != nil && !f.graph {
		err = hostRuns(ctx, su.b, s, p, pm, f.repeat, su.faults, c.newProgress(f.repeat, c.quietProgress(asJSON, p)))
	}
	if err != nil {
		at := interruptedAt{done: rep.Runs, repeat: f.repeat}
		if ctx.Err() != nil && f.traceFile != "" {
			at.trace = keepTrace(f.traceFile, rn.Session(0), p, rep)
		}
		return c.runFailure(ctx, s, err, saved, at)
	}
	// The outputs' checksums were computed beside the session's Close and
	// are waited for beside the backend's.
	berr := su.b.Close()
	sums.fill(report.Outputs)
	if berr != nil {
		return berr
	}
	report.SchemaVersion, report.Spec, report.Backend = schemaVersion, s.File, su.used
	if auto {
		noteAutoCapture(c.stderr, rep.Log, f.verbose, &report)
	}
	if f.traceFile != "" {
		report.TracedRuns = rep.TracedRuns()
	}
	note := timingNote(rn.Session(0), nil)
	for _, u := range unfusedNotes(rn.Session(0)) {
		fmt.Fprintf(c.stderr, "dagrun run: note: %s\n", u)
	}
	if pm != nil {
		report.Makespan = makespanOf(p, pm.Model, report.Graph, pm.Eager())
		// Replays traced op by op ran slower than they do untraced (CUPTI's
		// cost per node; timed by events, each traced replay ran alone):
		// their time each would mislead the model. Whole replays timed by
		// CUPTI's graph-level records cost nearly nothing.
		if !f.graph || f.traceFile == "" || f.timingSource() == "cupti-graph" {
			pm.observeReplays(report.Graph)
		}
	}
	if asJSON {
		report.Warnings = specWarnings(s)
	}

	var memErr error
	for _, r := range report.Memory {
		if r.Warning != "" {
			fmt.Fprintf(c.stderr, "dagrun run: warning: memory %s: %s\n", r.Memory, r.Warning)
		}
		if err := r.overBudget(); err != nil && memErr == nil {
			memErr = err
		}
	}

	var traceSummary bytes.Buffer
	if f.traceFile != "" {
		var err error
		if report.Planned, note, err = writeRunTrace(&traceSummary, f, rn.Session(0), p, pm, rep, su.used); err != nil {
			return err
		}
	}
	if pm != nil { // after the comparison with the plan, which uses the model as planned
		pr, err := pm.Save()
		if err != nil {
			return err
		}
		report.PerfModel = &pr
	}
	// The cpu backend has one clock: how it timed ops is news only with -v.
	if note != "" && (!f.graph || f.traceFile != "") && (su.used != "cpu" || f.verbose) {
		fmt.Fprintf(c.stderr, "dagrun run: %s\n", note)
	}
	if asJSON {
		// The trace summary is text; the JSON document holds none.
		if _, err := traceSummary.WriteTo(c.stderr); err != nil {
			return err
		}
		if err := c.writeOutput(f.out, func(w io.Writer) error { return writeJSON(w, report) }); err != nil {
			return err
		}
		return memErr
	}
	if err := c.writeOutput(f.out, func(w io.Writer) error {
		if err := c.printReport(w, report, f.repeat); err != nil {
			return err
		}
		printPerfModel(w, report, pm)
		_, err := traceSummary.WriteTo(w)
		return err
	}); err != nil {
		return err
	}
	return memErr // after the report, which shows what was measured
}

// runnerOptions are the options of the runner of a run of one program:
// the faults asked for, timing for a trace and a perf model's eager runs,
// where temporaries live, when to capture, and the progress bar.
func (c *cli) runnerOptions(f *runFlags, su *runSetup, pm *perfModel, auto bool, bar *progress) []executor.Option {
	opts := slices.Clone(su.faults)
	// Ops are timed for a trace, and for a perf model's eager runs (their
	// spans teach it). Replays teach a perf model only their time each,
	// which tracing their ops would inflate (by CUPTI's cost per node: 8x
	// for workload E's empty kernels on the H100), so untraced replays are
	// not timed.
	if f.traceFile != "" || (pm != nil && !f.graph) {
		opts = append(opts, executor.WithTiming(), executor.WithTimingSource(f.timingSource()))
	}
	if f.traceFile != "" {
		opts = append(opts, executor.WithTraceRuns(su.traced))
	}
	if f.detail.value == "replays" {
		opts = append(opts, executor.WithWholeReplays())
	}
	if mode, ok := executor.ParseTemporaryMode(f.temps.value); ok {
		opts = append(opts, executor.WithTemporaries(mode))
	}
	switch {
	case f.graph:
		opts = append(opts, executor.WithGraph(executor.GraphAlways))
	case auto:
		opts = append(opts, executor.WithGraph(executor.GraphAuto))
	}
	if pm != nil {
		opts = append(opts, executor.WithSubmitTiming(), learn(su.ranks, f.repeat, false))
	}
	opts = append(opts, executor.WithProgress(bar.update))
	if bar.w != nil {
		opts = append(opts, executor.WithOpsProgress(bar.opsProgress(su.ranks[0].p.Graph)))
	}
	return opts
}

// interruptedAt is how far the runs of a session had come when a signal
// stopped them: done of repeat (repeat 0: before they started).
type interruptedAt struct {
	done, repeat int
	trace        string // what became of the trace of the runs done (keepTrace)
}

func (at interruptedAt) String() string {
	if at.repeat == 0 {
		return "interrupted before the runs started; everything was freed"
	}
	s := fmt.Sprintf("interrupted after %d of %d %s completed; the one in flight was abandoned and everything was freed",
		at.done, at.repeat, plural(at.repeat, "run", "runs"))
	if at.trace != "" {
		s += "; " + at.trace
	}
	return s
}

// runFailure is the failure of a run: interrupted (status 130) when a
// signal ended ctx, said in plain words with how far the runs came (at),
// else the op's or backend's error; it names the outputs with a save
// path that were not written.
func (c *cli) runFailure(ctx context.Context, s *spec.Spec, err error, saved map[string]bool, at interruptedAt) error {
	var fl *failure
	if ctx.Err() != nil {
		fl = &failure{status: exitInterrupted, errors: []problem{{File: s.File, Message: at.String()}}}
	} else {
		fl = opFailure(s, err)
	}
	for _, out := range s.Outputs {
		if out.Save != "" && !saved[out.Save] {
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
