package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/executor/progress"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// Config says how Run and RunWorld run a job's programs.
type Config struct {
	// Backend is the name of the backend the programs run on
	// (device.Opened's). On "cpu" a plan costed by the default model, a
	// GPU's, is not compared with the runs: every op would be late.
	Backend string
	// Layout is the programs' placement, whose memory budgets the memory
	// reports hold the runs to.
	Layout Layout
	Repeat int
	Graph  executor.GraphMode
	// Traced chooses the runs whose op times are kept
	// (executor.WithTraceRuns); nil keeps none and times nothing for it.
	Traced       func(run int) bool
	WholeReplays bool // executor.WithWholeReplays
	// TimingSource is executor.WithTimingSource's; with WholeReplays,
	// replays are timed by CUPTI's graph-level records (cupti-graph)
	// unless events are asked for.
	TimingSource string
	Temporaries  executor.TemporaryMode
	// Options are more options of every runner: fault injection, say.
	Options []executor.Option
	// Progress makes the progress bar of each series of a program's runs
	// (its runs, then a perf model's untraced runs); nil draws none.
	Progress func() *progress.Bar

	// Place is this process's rank of a world of processes; nil runs
	// every rank of the world in this process.
	Place       *executor.Place
	World       int           // the ranks of the world
	RankTimeout time.Duration // executor.WithRankTimeout; 0 for its default
	// RankWaiting hears whom a rank's rendezvous waits for
	// (executor.WithRankWaiting).
	RankWaiting func(missing []int, waited time.Duration)
}

func (c Config) always() bool { return c.Graph == executor.GraphAlways }

// timingSource is the timing source the sessions are asked for.
func (c Config) timingSource() string {
	if c.WholeReplays && c.TimingSource != "events" {
		return "cupti-graph"
	}
	return c.TimingSource
}

// GraphMode is the graph mode spec s asks for: run.graph true is always,
// false never, and without it auto.
func GraphMode(s *spec.Spec) executor.GraphMode {
	switch {
	case s.Run.GraphSet && s.Run.Graph:
		return executor.GraphAlways
	case s.Run.GraphSet:
		return executor.GraphNever
	}
	return executor.GraphAuto
}

func (c Config) bar() *progress.Bar {
	if c.Progress == nil {
		return progress.New(nil, 0)
	}
	return c.Progress()
}

// RunError is an error of a job's runs, with how far they came: Done of
// Repeat (Repeat 0: before they started).
type RunError struct {
	Err          error
	Done, Repeat int
	// Traced says the traces of the runs done are worth keeping: the runs
	// themselves failed or were stopped.
	Traced bool
}

func (e *RunError) Error() string { return e.Err.Error() }

// Interrupted says in words how far the runs had come when a signal
// stopped them, and that nothing is left behind.
func (e *RunError) Interrupted() string {
	if e.Repeat == 0 {
		return "interrupted before the runs started; everything was freed"
	}
	return fmt.Sprintf("interrupted after %d of %s completed; the one in flight was abandoned and everything was freed",
		e.Done, human.Count(e.Repeat, "run", "runs"))
}
func (e *RunError) Unwrap() error { return e.Err }

// Timing is how a session timed ops (executor.Session.TimingSource).
type Timing struct {
	Source, Why string
	Dropped     uint64
}

// Note says it in a line, for a person; "" when ops were not timed.
func (t Timing) Note() string {
	if t.Source == "" {
		return ""
	}
	s := fmt.Sprintf("ops timed by %s (%s)", t.Source, t.Why)
	if t.Dropped > 0 {
		s += fmt.Sprintf("; %d activity records dropped, their ops' spans are missing", t.Dropped)
	}
	return s
}

// Run runs program p cfg.Repeat times on backend b with an
// executor.Runner, as cfg says, and reports the runs: their figures, the
// outputs read and saved (their checksums once Wait returns), the memory
// measured, and with a perf model its estimate against the runs. A perf
// model's runs stay eager and are run again as many times untraced, for
// the host's costs. Its errors are *RunError, with the report of the runs
// that completed.
func Run(ctx context.Context, b device.Backend, p *Program, cfg Config) (*Report, error) {
	// GraphAuto: the runs after a few identical ones replay a graph. A perf
	// model's eager runs teach it the host's submission costs, so they
	// stay eager.
	auto := cfg.Graph == executor.GraphAuto && p.Model == nil && cfg.Repeat > executor.DefaultAutoCapture
	r := &Report{SchemaVersion: SchemaVersion, Spec: p.Spec.File, Backend: cfg.Backend, Exec: &executor.Report{}, plan: p.Plan,
		gpuModelOnCPU: cfg.gpuModelOnCPU(p)}
	bar := cfg.bar()
	rn, err := executor.NewRunner(ctx, b, p.Plan, cfg.runnerOptions(p, auto, bar)...)
	if err != nil {
		return r, &RunError{Err: err}
	}
	rep, err := rn.Run(ctx, cfg.Repeat)
	r.Exec = rep
	bar.Clear()
	if err == nil {
		r.figures(p.Plan, rep)
		r.Outputs, r.wait, err = p.Spec.ReadOutputs(rn.Session(0).Read)
		r.Saves = p.Spec.SavedFiles()
		r.Memory = executor.MemoryReports(rn.Session(0), cfg.Layout.Budget(p.Spec)) // before Close
		r.MemoryBudget = budgetReport(p.Plan)
	}
	r.Unfused = UnfusedNotes(rn.Session(0)) // before Close, which releases the GEMMs
	if cerr := rn.Close(); err == nil {
		err = cerr
	}
	src, why, dropped := rn.Session(0).TimingSource()
	r.Timing = Timing{Source: src, Why: why, Dropped: dropped}
	if err == nil && p.Model != nil && !cfg.always() {
		err = hostRuns(ctx, b, p, cfg)
	}
	if err != nil {
		return r, &RunError{Err: err, Done: rep.Runs, Repeat: cfg.Repeat, Traced: true}
	}
	if l := rep.Log; l.CapturedAfter > 0 {
		r.Runs, r.CapturedAfter = l.String(), l.CapturedAfter
	}
	if cfg.Traced != nil {
		r.TracedRuns = rep.TracedRuns()
	}
	if p.Model != nil {
		r.Makespan = makespan(p, r.Graph)
		// Replays traced op by op ran slower than they do untraced (CUPTI's
		// cost per node; timed by events, each traced replay ran alone):
		// their time each would mislead the model. Whole replays timed by
		// CUPTI's graph-level records cost nearly nothing.
		if g := r.Graph; g != nil && g.Replays > 0 && (!cfg.always() || cfg.Traced == nil || cfg.timingSource() == "cupti-graph") {
			p.Model.ObserveReplay(time.Duration(g.PerReplayNS))
		}
	}
	if cfg.Traced != nil && !cfg.gpuModelOnCPU(p) {
		r.Planned = plannedVsAchieved(p, rep.Traced[0], cfg.always())
	}
	return r, nil
}

// UnfusedNotes say which fused ops the backend of sess ran apart, and
// why, a line each (executor.Session.Unfused); read them before the
// session closes.
func UnfusedNotes(sess *executor.Session) []string {
	var out []string
	for _, u := range sess.Unfused() {
		out = append(out, fmt.Sprintf("%s: epilogue %s run as builtin kernels after the gemm: %s", u.Op, u.Epilogue, u.Why))
	}
	return out
}

// gpuModelOnCPU reports whether p's plan is costed by the planner's
// default model, a GPU's, and run on the CPU backend: every op would be
// "late" and every overlap "lost", which says nothing about the plan.
func (c Config) gpuModelOnCPU(p *Program) bool { return c.Backend == "cpu" && p.Model == nil }

// runnerOptions are the options of the runner of one program: the faults
// asked for, timing for a trace and a perf model's eager runs, where
// temporaries live, when to capture, and the progress bar.
func (c Config) runnerOptions(p *Program, auto bool, bar *progress.Bar) []executor.Option {
	opts := slices.Clone(c.Options)
	// Ops are timed for a trace, and for a perf model's eager runs (their
	// spans teach it). Replays teach a perf model only their time each,
	// which tracing their ops would inflate (by CUPTI's cost per node: 8x
	// for workload E's empty kernels on the H100), so untraced replays are
	// not timed.
	if c.Traced != nil || (p.Model != nil && !c.always()) {
		opts = append(opts, executor.WithTiming(), executor.WithTimingSource(c.timingSource()))
	}
	if c.Traced != nil {
		opts = append(opts, executor.WithTraceRuns(c.Traced))
	}
	if c.WholeReplays {
		opts = append(opts, executor.WithWholeReplays())
	}
	opts = append(opts, executor.WithTemporaries(c.Temporaries))
	switch {
	case c.always():
		opts = append(opts, executor.WithGraph(executor.GraphAlways))
	case auto:
		opts = append(opts, executor.WithGraph(executor.GraphAuto))
	}
	if p.Model != nil {
		opts = append(opts, executor.WithSubmitTiming(), observer([]*Program{p}, c.Repeat, false))
	}
	return append(opts, bar.Options(profile.CPUOpTimes(p.Plan.Graph))...)
}

// Trace is the trace of the runs the report kept (its Exec's Traced and
// Whole), with how they were timed.
func (r *Report) Trace() *trace.Trace {
	rs := r.Exec
	t := trace.FromRuns(r.plan, rs.Traced[0])
	t.Figures.Timing, t.Figures.TimingReason, t.Figures.TimingDropped = r.Timing.Source, r.Timing.Why, r.Timing.Dropped
	t.Figures.Unfused = r.Unfused
	t.Figures.WholeReplays = len(rs.Whole) > 0
	t.Figures.Replays, t.Figures.ReplayTiming = rs.Whole, rs.WholeTiming
	if l := rs.Log; l.CapturedAfter > 0 {
		t.Figures.Runs = l.String()
	}
	return t
}

// WriteTraceSummary writes the summary of t, the report's Trace: its
// figures (the longest waits too, with all), the replays traced whole (the
// first few, or with all every one), and the plan against the last traced
// run, in a line or, with all, op by op. Where the plan's costs are a
// GPU's and the runs the CPU backend's, its estimate is left out.
func (r *Report) WriteTraceSummary(w io.Writer, t *trace.Trace, all bool) error {
	if err := t.WriteSummaryWith(w, trace.SummaryOptions{Brief: !all, NoEstimate: r.gpuModelOnCPU}); err != nil {
		return err
	}
	t.WriteReplays(w, all)
	switch cmp := r.Planned; {
	case cmp != nil && all:
		return cmp.Write(w)
	case cmp != nil:
		_, err := fmt.Fprintln(w, cmp.Brief())
		return err
	}
	return nil
}

// SaveModel saves p's perf model, which its runs taught (profile.Learner's
// Save), into the report. Call it after Trace's comparison with the plan,
// which uses the model as planned.
func (r *Report) SaveModel(p *Program) error {
	u, err := p.Model.Save()
	if err != nil {
		return err
	}
	r.PerfModel = &u
	return nil
}

// plannedVsAchieved compares the last traced run (a replay when replayed)
// with the plan's simulation under the model it was planned with (the
// perf model, else the default costs).
func plannedVsAchieved(p *Program, runs []trace.RunSpans, replayed bool) *trace.Comparison {
	if len(runs) == 0 || len(runs[len(runs)-1].Spans) == 0 {
		return nil
	}
	var cost perf.CostModel = perf.DefaultCost()
	if p.Model != nil {
		cost = p.Model.Model
	}
	c := trace.ComparePlan(p.Plan, cost, Mode(replayed), runs[len(runs)-1].Spans)
	return &c
}

// makespan compares the plan's estimate under p's model with a replay's
// time each (g) or the untraced eager runs' wall times.
func makespan(p *Program, g *GraphReport) *profile.Makespan {
	var each time.Duration
	if g != nil && g.Replays > 0 {
		each = time.Duration(g.PerReplayNS)
	}
	return profile.Compare(p.Plan, p.Model.Model, each, p.Model.Eager())
}

// hostRuns runs p repeat more times, untraced, for its perf model: the
// host's submission costs and each run's wall time, which the model learns
// the host's costs and a run's start from and the run's estimate is
// compared with. The traced runs before them teach only the ops'
// durations: tracing op by op slows the host's submission (CUPTI's cost
// per op, 1.5-2 us on the H100, was a third of workload E's makespan), and
// the runs a model plans for are not traced.
func hostRuns(ctx context.Context, b device.Backend, p *Program, cfg Config) error {
	ps := []*Program{p}
	return untracedRuns(ctx, cfg, ps, cfg.bar(), func(opts ...executor.Option) (*executor.Runner, error) {
		return executor.NewRunner(ctx, b, p.Plan, append(opts, observer(ps, cfg.Repeat, false))...)
	}, cfg.Options)
}

// observer passes each run of the programs ps (one, or with ranks a rank
// each) to its perf model.
func observer(ps []*Program, repeat int, ranks bool) executor.Option {
	return executor.WithObserver(func(o executor.Observation) error {
		err := ps[o.Rank].Model.ObserveRun(o, repeat)
		if err != nil && ranks {
			err = fmt.Errorf("rank %d: %w", ps[o.Rank].Rank, err)
		}
		return err
	})
}

// untraced runs the runner open opens (with opts, each step's submission
// timed) cfg.Repeat times with the progress bar, then closes it. The
// programs' host steps print nothing meanwhile: their lines came with the
// traced runs.
func untracedRuns(ctx context.Context, cfg Config, ps []*Program, bar *progress.Bar, open func(...executor.Option) (*executor.Runner, error), opts []executor.Option) error {
	for _, p := range ps {
		out := p.Spec.Stdout
		p.Spec.Stdout = nil
		defer func(s *spec.Spec) { s.Stdout = out }(p.Spec)
	}
	defer bar.Clear()
	rn, err := open(append(slices.Clone(opts), executor.WithSubmitTiming(), executor.WithProgress(bar.Runs))...)
	if err != nil {
		return err
	}
	_, err = rn.Run(ctx, cfg.Repeat)
	return errors.Join(err, rn.Close())
}
