package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/profile"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// Perf models in the CLI: --perf-model FILE on plan and run. Package
// profile does the learning; this file loads, plans and prints.

// perfModel is a loaded --perf-model file and, until the plan has been
// made, how to warn about it.
type perfModel struct {
	*profile.Learner
	// warn prints a warning about the model; planWithModel uses it once.
	warn func(string)
}

// loadPerfModel reads path for device dev of backend b (a spec's plan is
// keyed by device 0; a rank's by its own). A file that cannot be used is a
// warning on stderr: the model is then empty, so the plan uses default
// costs, and the file is not overwritten.
func (c *cli) loadPerfModel(cmd, path string, b device.Backend, dev int) (*perfModel, error) {
	key, err := profile.Key(b, dev)
	if err != nil {
		return nil, fmt.Errorf("--perf-model %s: %w", human.Quote(path), err)
	}
	l, err := profile.Load(path, key)
	if err != nil {
		return nil, err
	}
	if l.Unusable != nil {
		fmt.Fprintf(c.stderr, "dagrun %s: warning: %v\n", cmd, l.Unusable)
	}
	return &perfModel{Learner: l,
		warn: func(msg string) {
			fmt.Fprintf(c.stderr, "dagrun %s: warning: perf model %s: %s\n", cmd, human.Quote(path), msg)
		}}, nil
}

// planWithModel plans s as makePlan does, costing ops with pm's model
// (when not nil), estimating for mode, with what the backend knows of the
// machine m (copies between devices, multiprocessors); it tells pm the
// plan and warns once of the model's extrapolations.
func planWithModel(s *spec.Spec, l layout, pm *perfModel, mode planner.Mode, m executor.Machine) (*planner.Plan, error) {
	opts := planOptions(s, l)
	opts.Mode = mode
	m.Apply(&opts)
	if pm != nil {
		opts.Cost = pm.Model
	}
	p, err := buildPlan(s, opts)
	if err != nil {
		return nil, err
	}
	if pm != nil {
		pm.Planned(p)
		if pm.warn != nil {
			for _, w := range pm.Model.Extrapolations(s.Graph.Ops) {
				pm.warn(w)
			}
			pm.warn = nil
		}
	}
	return p, nil
}

// coverage is the line plan and run print about the model's use.
func (pm *perfModel) coverage() string {
	return fmt.Sprintf("perf model %s: %d of %d ops costed from measurements", human.Quote(pm.Path), pm.Covered, pm.Ops)
}

// hostRuns runs p repeat more times, untraced, for the perf model of an
// eager run: the host's submission costs and each run's wall time, which
// the model learns the host's costs and a run's start from and the run's
// estimate is compared with. The traced runs before them teach only the
// ops' durations: tracing op by op slows the host's submission (CUPTI's
// cost per op, 1.5-2 us on the H100, was a third of workload E's
// makespan), and the runs a model plans for are not traced.
func hostRuns(ctx context.Context, b device.Backend, s *spec.Spec, p *planner.Plan, pm *perfModel, repeat int, opts []executor.Option, bar *progress) error {
	return timeUntraced(ctx, repeat, []*spec.Spec{s}, bar, func(opts ...executor.Option) (*executor.Runner, error) {
		return executor.NewRunner(ctx, b, p, append(opts, learn([]*rankRun{{s: s, p: p, pm: pm}}, repeat, false))...)
	}, opts)
}

// learn is the observer that passes each run of the programs rs (one, or
// with ranks a rank each) to its perf model.
func learn(rs []*rankRun, repeat int, ranks bool) executor.Option {
	return executor.WithObserver(func(o executor.Observation) error {
		err := rs[o.Rank].pm.ObserveRun(o, repeat)
		if err != nil && ranks {
			err = fmt.Errorf("rank %d: %w", rs[o.Rank].rank, err)
		}
		return err
	})
}

// timeUntraced runs the runner open opens (with opts, each step's
// submission timed) repeat times, with the progress bar, then closes it.
// The specs' host steps print nothing meanwhile: their lines came with the
// traced runs.
func timeUntraced(ctx context.Context, repeat int, specs []*spec.Spec, bar *progress, open func(...executor.Option) (*executor.Runner, error), opts []executor.Option) error {
	for _, s := range specs {
		out := s.Stdout
		s.Stdout = nil
		defer func() { s.Stdout = out }()
	}
	defer bar.clear()
	rn, err := open(append(slices.Clone(opts), executor.WithSubmitTiming(), executor.WithProgress(bar.update))...)
	if err != nil {
		return err
	}
	_, err = rn.Run(ctx, repeat)
	return errors.Join(err, rn.Close())
}

// observeReplays keeps the measured time per replay of g.
func (pm *perfModel) observeReplays(g *graphReport) {
	if g != nil && g.Replays > 0 {
		pm.ObserveReplay(time.Duration(g.PerReplayNS))
	}
}

// makespanOf compares the plan's estimate under m with a replay's time
// each (g) or the untraced eager runs' wall times.
func makespanOf(p *planner.Plan, m *perf.PerfModel, g *graphReport, eager []time.Duration) *profile.Makespan {
	var each time.Duration
	if g != nil && g.Replays > 0 {
		each = time.Duration(g.PerReplayNS)
	}
	return profile.Compare(p, m, each, eager)
}

// writeMakespan writes r as a line of text (and one more when host-bound).
func writeMakespan(w io.Writer, r *profile.Makespan) {
	spread := ""
	if r.MeasuredQ3NS > 0 {
		spread = fmt.Sprintf("; quartiles %s, %s, %s", short(r.MeasuredQ1NS), short(r.MeasuredMedianNS), short(r.MeasuredQ3NS))
	}
	fmt.Fprintf(w, "makespan (%s): estimated %s, measured %s (estimate/measured %.2f; measured: %s%s)\n",
		r.Mode, short(r.EstimatedNS), short(r.MeasuredNS), r.Ratio, r.Source, spread)
	if r.HostBound {
		fmt.Fprintf(w, "  host-bound: the device's own work is %s of the estimate; the host's submission speed sets the rest and drifts, so learn and measure over a second or more of runs (--repeat); --graph replays do not depend on it\n",
			short(r.DeviceNS))
	}
}

// timingNote is what dagrun run says on stderr about how ops were timed,
// and sets in the trace's figures.
func timingNote(sess *executor.Session, t *trace.Trace) string {
	src, why, dropped := sess.TimingSource()
	if t != nil {
		t.Figures.Timing, t.Figures.TimingReason, t.Figures.TimingDropped = src, why, dropped
		t.Figures.Unfused = unfusedNotes(sess)
	}
	if src == "" {
		return ""
	}
	s := fmt.Sprintf("ops timed by %s (%s)", src, why)
	if dropped > 0 {
		s += fmt.Sprintf("; %d activity records dropped, their ops' spans are missing", dropped)
	}
	return s
}

// unfusedNotes say which fused ops the backend ran apart, and why.
func unfusedNotes(sess *executor.Session) []string {
	var out []string
	for _, u := range sess.Unfused() {
		out = append(out, fmt.Sprintf("%s: epilogue %s run as builtin kernels after the gemm: %s", u.Op, u.Epilogue, u.Why))
	}
	return out
}

// runMode is the planner's mode for a run: a replay with --graph.
func runMode(graph bool) planner.Mode {
	if graph {
		return planner.Replay
	}
	return planner.Eager
}

// printPerfModel adds dagrun run's perf-model lines to its text report.
func printPerfModel(w io.Writer, r runReport, pm *perfModel) {
	if pm == nil {
		return
	}
	writePerfModel(w, "", pm, r.Makespan, r.PerfModel)
}

// writePerfModel writes the perf-model lines of a run (of one rank, with
// prefix "rank N "): the model's use, the makespan compared, the update.
func writePerfModel(w io.Writer, prefix string, pm *perfModel, m *profile.Makespan, pr *profile.Update) {
	fmt.Fprintln(w, prefix+pm.coverage())
	if m != nil {
		fmt.Fprint(w, prefix)
		writeMakespan(w, m)
	}
	if pr != nil {
		if pr.Updated {
			fmt.Fprintf(w, "%sperf model %s updated from %d op samples\n", prefix, human.Quote(pr.Path), pr.Samples)
		} else {
			fmt.Fprintf(w, "%sperf model %s not updated\n", prefix, human.Quote(pr.Path))
		}
	}
}

// planPerfFlags are dagrun plan's perf-model flags.
type planPerfFlags struct {
	path    string
	backend *oneOf
	graph   bool
}

func (f *planPerfFlags) addFlags(fs *flag.FlagSet) {
	f.backend = backendFlag()
	f.backend.value = "auto"
	fs.StringVar(&f.path, "perf-model", "", "")
	fs.Var(f.backend, "backend", "")
	fs.BoolVar(&f.graph, "graph", false, "")
}

// planPerf plans s as makePlan does, or with --perf-model, with the model
// of the device --backend names (the backend is opened only to name its
// device) for the mode --graph says.
func (c *cli) planPerf(s *spec.Spec, l layout, f planPerfFlags) (*planner.Plan, *perfModel, error) {
	if f.path == "" {
		if f.graph {
			return nil, nil, usagef("--graph chooses the mode --perf-model estimates; add --perf-model FILE")
		}
		p, err := makePlan(s, l)
		return p, nil, err
	}
	b, _, _, err := openBackend(f.backend.value, false)
	if err != nil {
		return nil, nil, err
	}
	pm, err := c.loadPerfModel("plan", f.path, b, 0)
	var mach executor.Machine
	if err == nil {
		mach, err = executor.MachineOf(b, s.Graph)
	}
	if cerr := b.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the backend: %w", cerr)
	}
	if err != nil {
		return nil, nil, err
	}
	p, err := planWithModel(s, l, pm, runMode(f.graph), mach)
	return p, pm, err
}

// withPerfModel adds the perf model's coverage to dagrun plan's JSON.
func withPerfModel(obj []byte, pm *perfModel) ([]byte, error) {
	if pm == nil {
		return obj, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return nil, err
	}
	r, err := json.Marshal(profile.Update{Path: pm.Path, Measured: pm.Covered, Ops: pm.Ops})
	if err != nil {
		return nil, err
	}
	fields["perf_model"] = r
	return json.Marshal(fields)
}

// plannedVsAchieved compares the last traced run (a replay with graph)
// with the plan's simulation under the model it was planned with (the perf
// model, else the default costs).
func plannedVsAchieved(p *planner.Plan, pm *perfModel, runs []trace.RunSpans, graph bool) *trace.Comparison {
	if len(runs) == 0 || len(runs[len(runs)-1].Spans) == 0 {
		return nil
	}
	var cost perf.CostModel = perf.DefaultCost()
	if pm != nil {
		cost = pm.Model
	}
	c := trace.ComparePlan(p, cost, runMode(graph), runs[len(runs)-1].Spans)
	return &c
}
