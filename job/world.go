package job

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// WorldReport is what RunWorld reports of the runs of a world's ranks: as
// JSON, the document dagrun run --format json writes for them; as text
// (WriteText), its summary.
type WorldReport struct {
	SchemaVersion int    `json:"schema_version"`
	Spec          string `json:"spec"`
	Backend       string `json:"backend"`
	World         int    `json:"world"`
	Processes     bool   `json:"processes"` // one rank per process: Ranks holds this process's
	Addr          string `json:"rendezvous,omitempty"`
	Repeat        int    `json:"repeat"`
	Ops           int    `json:"ops"` // of one rank
	Streams       int    `json:"streams"`
	Waits         int    `json:"waits"`
	// WallNS is every run's time; under Graph the first, eager run's and
	// the capture's too, which Replays leaves out.
	WallNS int64 `json:"wall_ns"`
	Graph  bool  `json:"graph,omitempty"`
	// Replays is the figures of the replays alone under Graph, each
	// launched on every rank and waited for, as a program that captures
	// a world times it; nil when none ran.
	Replays *GraphReport `json:"replays,omitempty"`
	Ranks   []RankReport `json:"ranks"`

	// Since is how long after the ranks' rendezvous their runs started:
	// the offset of their traces (Traces).
	Since time.Duration `json:"-"`
}

// RankReport is one rank's outputs in a WorldReport, and with a perf
// model its estimate against the measured makespan and its model.
type RankReport struct {
	Rank      int                 `json:"rank"`
	Outputs   []spec.OutputResult `json:"outputs"`
	Saves     []spec.SavedFile    `json:"saves,omitempty"`
	Makespan  *profile.Makespan   `json:"makespan,omitempty"`
	PerfModel *profile.Update     `json:"perf_model,omitempty"`
}

// RunWorld runs the programs ps, the ranks of a world, cfg.Repeat times on
// backend b: all of them in this process, or with cfg.Place this
// process's rank of a world of processes. Under GraphAlways the first run
// is eager and the others replay a graph captured after it. It keeps each
// rank's traced runs (Program.Traced) and reports every rank's outputs;
// with perf models, the ranks run as many times again untraced for the
// host's costs, and each rank's estimate is set against its runs. The
// errors of the runs are *RunError.
func RunWorld(ctx context.Context, b device.Backend, ps []*Program, cfg Config) (*WorldReport, error) {
	models := ps[0].Model != nil
	untraced := slices.Clone(cfg.Options)
	if cfg.RankTimeout > 0 {
		untraced = append(untraced, executor.WithRankTimeout(cfg.RankTimeout))
	}
	opts := slices.Clone(untraced)
	if cfg.Traced != nil || models {
		opts = append(opts, executor.WithTiming())
	}
	if cfg.always() {
		opts = append(opts, executor.WithGraph(executor.GraphAlways))
	}
	if cfg.Traced != nil {
		opts = append(opts, executor.WithTraceRuns(cfg.Traced))
	}
	if models {
		opts = append(opts, observer(ps, cfg.Repeat, true))
	}
	rep := &WorldReport{SchemaVersion: SchemaVersion, Spec: ps[0].Spec.File, Backend: cfg.Backend, World: cfg.World, Processes: cfg.Place != nil,
		Repeat: cfg.Repeat, Ops: ps[0].Plan.Stats.Ops, Streams: ps[0].Plan.Stats.Streams, Waits: ps[0].Plan.Stats.Waits,
		Graph: cfg.always()}
	if cfg.Place != nil {
		rep.Addr = cfg.Place.Addr
	}
	rn, err := openRanks(ctx, b, ps, cfg, opts)
	if err != nil {
		return rep, &RunError{Err: err}
	}
	run, err := rn.Run(ctx, cfg.Repeat)
	for i, p := range ps {
		p.Traced = run.Traced[i]
	}
	rep.Since, rep.WallNS = run.Start.Sub(rn.Opened()), run.Wall.Nanoseconds()
	rep.Replays = graphReport(run.Replays, rep.Ops)
	if err != nil {
		// An interrupt keeps the traces of the runs that completed.
		return rep, &RunError{Err: errors.Join(err, rn.Close()), Done: run.Runs, Repeat: cfg.Repeat, Traced: true}
	}
	for i, p := range ps {
		outs, sums, err := p.Spec.ReadOutputs(rn.Session(i).Read)
		if err != nil {
			return rep, errors.Join(fmt.Errorf("rank %d: %w", p.Rank, err), rn.Close())
		}
		sums()
		rep.Ranks = append(rep.Ranks, RankReport{Rank: p.Rank, Outputs: outs, Saves: p.Spec.SavedFiles()})
	}
	if err := rn.Close(); err != nil {
		return rep, err
	}
	if !models {
		return rep, nil
	}
	// The world (or this process's rank of it, meeting the others at a
	// second rendezvous) run again untraced, each rank's submission timed,
	// each run's wall time its ranks' measured makespan (the ranks run
	// together).
	err = untracedRuns(ctx, cfg, ps, cfg.bar(), func(opts ...executor.Option) (*executor.Runner, error) {
		return openRanks(ctx, b, ps, cfg, append(opts, observer(ps, cfg.Repeat, true)))
	}, untraced)
	if err != nil {
		return rep, &RunError{Err: err, Done: cfg.Repeat, Repeat: cfg.Repeat}
	}
	for i, p := range ps {
		rep.Ranks[i].Makespan = makespan(p, nil)
	}
	return rep, nil
}

// openRanks opens the runner of the ranks ps: every rank of a world in this
// process, or with cfg.Place this process's rank of a world of processes.
func openRanks(ctx context.Context, b device.Backend, ps []*Program, cfg Config, opts []executor.Option) (*executor.Runner, error) {
	if cfg.Place != nil {
		if cfg.RankWaiting != nil {
			opts = append(slices.Clone(opts), executor.WithRankWaiting(cfg.RankWaiting))
		}
		return executor.JoinRunner(ctx, b, ps[0].Plan, *cfg.Place, opts...)
	}
	plans := make([]*planner.Plan, len(ps))
	for i, p := range ps {
		plans[i] = p.Plan
	}
	return executor.NewWorldRunner(ctx, b, plans, opts...)
}

// SaveModels saves each rank's perf model, which its runs taught
// (profile.Learner's Save), into the report.
func (r *WorldReport) SaveModels(ps []*Program) error {
	for i, p := range ps {
		u, err := p.Model.Save()
		if err != nil {
			return fmt.Errorf("rank %d: %w", p.Rank, err)
		}
		r.Ranks[i].PerfModel = &u
	}
	return nil
}

// Traces are the traces of the runs each rank of ps kept, each on the
// world's clock (trace.RankClock), by rank.
func (r *WorldReport) Traces(ps []*Program) []*trace.Trace {
	ts := make([]*trace.Trace, len(ps))
	for i, p := range ps {
		ts[i] = trace.FromRankRuns(p.Plan, p.Traced, p.Rank, r.World, r.Since)
	}
	return ts
}

// WriteText writes the report as dagrun run prints it: each rank's
// outputs, a line on the runs, and with perf models each rank's lines.
func (r *WorldReport) WriteText(w io.Writer, ps []*Program) error {
	bw := bufio.NewWriter(w)
	for _, rr := range r.Ranks {
		writeOutputs(bw, fmt.Sprintf("rank %d ", rr.Rank), rr.Outputs, rr.Saves)
	}
	how := fmt.Sprintf("%d ranks in one process", r.World)
	if r.Processes {
		how = fmt.Sprintf("rank %d of %d processes (rendezvous at %s)", r.Ranks[0].Rank, r.World, r.Addr)
	}
	runs := "1 run"
	switch {
	case r.Graph && r.Repeat > 1:
		// No time per run: it would spread the eager run (NCCL's
		// connections, the libraries' first calls) and the capture over
		// the replays. The graph's line has a replay's.
		runs = fmt.Sprintf("%d runs (the first eager, then replays of a graph captured after it)", r.Repeat)
	case r.Repeat > 1:
		runs = fmt.Sprintf("%d runs (%s each)", r.Repeat, short(r.WallNS/int64(r.Repeat)))
	}
	fmt.Fprintf(bw, "ran %s on %s as %s: %s, %s, %s per rank, %s in %s\n",
		human.Quote(r.Spec), r.Backend, how, human.Count(r.Ops, "op", "ops"), human.Count(r.Streams, "stream", "streams"),
		human.Count(r.Waits, "wait", "waits"), runs, short(r.WallNS))
	if r.Replays != nil {
		r.Replays.writeLine(bw)
	}
	for i, p := range ps {
		if p.Model != nil {
			WriteModel(bw, fmt.Sprintf("rank %d ", p.Rank), p.Model, r.Ranks[i].Makespan, r.Ranks[i].PerfModel)
		}
	}
	return bw.Flush()
}
