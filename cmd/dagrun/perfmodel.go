package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/cuda"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/spec"
	"github.com/dagrun/dagrun/trace"
)

// Perf models in the CLI: --perf-model FILE on plan and run.

// perfModel is a loaded --perf-model file and what the runs taught it.
type perfModel struct {
	path  string
	model *planner.PerfModel
	// usable is false when the file could not be used (corrupt, of another
	// device or version): the plan fell back to default costs, and the file
	// is left as it is.
	usable bool
	// covered of ops were costed from measurements in the plan.
	covered, ops int
	samples      []planner.OpSample
	overheads    map[planner.Overhead][]time.Duration
	// warn prints a warning about the model once (warned) per process.
	warn   func(string)
	warned bool
	// plan is the plan the runs ran; eager and replays are the wall times
	// of its untraced eager runs (hostRuns) and its time per replay, from
	// which save learns the fixed cost of a run's start.
	plan    *planner.Plan
	eager   []time.Duration
	replays []time.Duration
}

// deviceKey is the perf-model key of device dev of a backend: the CPU
// backend is "cpu" with its cores; a CUDA backend's is the device's.
func deviceKey(b device.Backend, dev int) (planner.DeviceKey, error) {
	switch b := b.(type) {
	case *cpu.Backend:
		return planner.DeviceKey{Name: "cpu", SMs: runtime.NumCPU()}, nil
	case *cuda.Backend:
		name, sms, err := b.DeviceInfo(dev)
		if err != nil {
			return planner.DeviceKey{}, err
		}
		return planner.DeviceKey{Name: name, SMs: sms, Driver: b.DriverVersion()}, nil
	}
	return planner.DeviceKey{}, fmt.Errorf("backend %T keeps no perf model", b)
}

// loadPerfModel reads path for device dev of backend b (a spec's plan is
// keyed by device 0; a rank's by its own). A file that cannot be used is a
// warning on stderr: the model is then empty, so the plan uses default
// costs, and the file is not overwritten.
func (c *cli) loadPerfModel(cmd, path string, b device.Backend, dev int) (*perfModel, error) {
	key, err := deviceKey(b, dev)
	if err != nil {
		return nil, fmt.Errorf("--perf-model %s: %w", path, err)
	}
	m, err := planner.LoadPerfModel(path, key, nil)
	pm := &perfModel{path: path, model: m, usable: true, overheads: map[planner.Overhead][]time.Duration{},
		warn: func(msg string) { fmt.Fprintf(c.stderr, "dagrun %s: warning: perf model %s: %s\n", cmd, path, msg) }}
	if err != nil {
		if _, ok := errors.AsType[*planner.PerfModelError](err); !ok {
			return nil, err
		}
		pm.usable = false
		fmt.Fprintf(c.stderr, "dagrun %s: warning: %v\n", cmd, err)
	}
	return pm, nil
}

// planWithModel plans s as makePlan does, costing ops with pm's model
// (when not nil), estimating for mode, with what the backend knows of the
// machine m (copies between devices, multiprocessors); it records how many ops were costed from
// measurements.
func planWithModel(s *spec.Spec, l layout, pm *perfModel, mode planner.Mode, m machine) (*planner.Plan, error) {
	opts := planOptions(s, l)
	opts.Mode, opts.Topology, opts.SMs = mode, m.topo, m.sms
	if pm != nil {
		opts.Cost = pm.model
	}
	p, err := buildPlan(s, opts)
	if err != nil {
		return nil, err
	}
	if pm != nil {
		pm.covered, pm.ops = pm.model.Covered(s.Graph.Ops), len(s.Graph.Ops)
		pm.plan = p
		if pm.warn != nil && !pm.warned {
			pm.warned = true
			for _, w := range pm.model.Extrapolations(s.Graph.Ops) {
				pm.warn(w)
			}
		}
	}
	return p, nil
}

// coverage is the line plan and run print about the model's use.
func (pm *perfModel) coverage() string {
	return fmt.Sprintf("perf model %s: %d of %d ops costed from measurements", pm.path, pm.covered, pm.ops)
}

// perfModelReport is the model's part of dagrun run's and plan's JSON.
type perfModelReport struct {
	Path     string `json:"path"`
	Measured int    `json:"ops_measured"`
	Ops      int    `json:"ops"`
	Updated  bool   `json:"updated"`
	Samples  int    `json:"samples,omitempty"`
}

// warmups is how many of repeat runs warm up and are left out of what is
// measured and learned: modules, memory pools and caches, and the clocks
// of an idle GPU and host. On the H100 the small examples' runs took three
// or four runs to settle, so the first half of the runs warm up (at least
// the first of several).
func warmups(repeat int) int {
	if repeat <= 1 {
		return 0
	}
	return max(1, repeat/2)
}

// observe keeps what traced run number run (from 1) of repeat measured:
// its ops' durations. The warm-up runs (warmups) teach nothing. The host's
// costs come from untraced runs (observeHost).
func (pm *perfModel) observe(g *dag.Graph, spans []executor.Span, run, repeat int) error {
	if run <= warmups(repeat) {
		return nil
	}
	samples, err := trace.PerfSamples(g, spans)
	if err != nil {
		return err
	}
	pm.samples = append(pm.samples, samples...)
	return nil
}

// observeHost keeps what untraced run number run (from 1) of repeat
// measured: its wall time, from Run to the end of its work (the makespan
// a program sees), and the host's submission costs of its steps. The
// warm-up runs teach nothing.
func (pm *perfModel) observeHost(sess *executor.Session, wall time.Duration, run, repeat int) {
	if run <= warmups(repeat) {
		return
	}
	pm.eager = append(pm.eager, wall)
	costs, ok := sess.SubmitCosts()
	if !ok {
		return
	}
	for k, c := range costs.Ops {
		if c.Count > 0 {
			name := planner.SubmitOverhead(k)
			pm.overheads[name] = append(pm.overheads[name], c.Mean())
		}
	}
	if costs.Records.Count > 0 {
		pm.overheads[planner.OverheadRecord] = append(pm.overheads[planner.OverheadRecord], costs.Records.Mean())
	}
	if costs.Waits.Count > 0 {
		pm.overheads[planner.OverheadWait] = append(pm.overheads[planner.OverheadWait], costs.Waits.Mean())
	}
}

// hostRuns runs p repeat more times, untraced, for the perf model of an
// eager run: the host's submission costs and each run's wall time, which
// the model learns the host's costs and a run's start from and the run's
// estimate is compared with. The traced runs before them teach only the
// ops' durations: tracing op by op slows the host's submission (CUPTI's
// cost per op, 1.5-2 us on the H100, was a third of workload E's
// makespan), and the runs a model plans for are not traced.
func (c *cli) hostRuns(ctx context.Context, b device.Backend, s *spec.Spec, p *planner.Plan, pm *perfModel, repeat int, opts []executor.Option, bar *progress) error {
	sess, err := executor.Open(ctx, b, p, append(slices.Clone(opts), executor.WithSubmitTiming())...)
	if err != nil {
		return err
	}
	return timeUntraced(ctx, repeat, []*spec.Spec{s}, bar, sess.Run, sess.Close, func(wall time.Duration, n int) {
		pm.observeHost(sess, wall, n, repeat)
	})
}

// timeUntraced calls run repeat times, passing each run's wall time and
// number (from 1) to observe, then closer; on a run's failure it closes
// and returns both errors. The specs' host steps print nothing meanwhile:
// their lines came with the traced runs.
func timeUntraced(ctx context.Context, repeat int, specs []*spec.Spec, bar *progress, run func(context.Context) error, closer func() error, observe func(wall time.Duration, n int)) error {
	for _, s := range specs {
		out := s.Stdout
		s.Stdout = nil
		defer func() { s.Stdout = out }()
	}
	defer bar.clear()
	for n := 1; n <= repeat; n++ {
		start := time.Now()
		if err := run(ctx); err != nil {
			return errors.Join(err, closer())
		}
		observe(time.Since(start), n)
		bar.update(n)
	}
	return closer()
}

// observeReplays keeps the measured time per replay (launched back to
// back) of the plan planWithModel made, from which save learns a replay's
// fixed start.
func (pm *perfModel) observeReplays(g *graphReport) {
	if g == nil || g.Replays == 0 {
		return
	}
	pm.replays = append(pm.replays, time.Duration(g.PerReplayNS))
}

// learnStarts folds into the model the fixed cost of a run's start, eager
// and replayed: the mean measured makespan less the model's estimate of
// the plan without that cost (never below zero). The per-op
// costs (durations, submissions, events, a replay's per node) are
// measured apart, so what is left is what every run pays once: the host's
// setup of a run, the launch of a graph. The model's op costs must be
// updated first.
func (pm *perfModel) learnStarts() error {
	if pm.plan == nil {
		return nil
	}
	learn := func(name planner.Overhead, mode planner.Mode, measured []time.Duration) error {
		if len(measured) == 0 {
			return nil
		}
		o := pm.model.Overheads()
		o.Start, o.ReplayStart = 0, 0
		est := planner.Simulate(pm.plan, planner.WithOverheads(pm.model, o), mode).Makespan
		// One observation per dagrun run, of the mean over its runs: the
		// model's per-op costs are means over the same runs, so where the
		// host's speed moved between runs (it does, on the H100 machine,
		// by up to 1.8x), both count each run alike and the difference is
		// the fixed cost alone; a median would pick one of the speeds.
		return pm.model.ObserveOverheadWeighted(name, max(meanDuration(measured)-est, 0), startWeight(est))
	}
	if err := learn(planner.OverheadStart, planner.Eager, pm.eager); err != nil {
		return err
	}
	return learn(planner.OverheadReplayStart, planner.Replay, pm.replays)
}

// meanDuration is the mean of ds (not empty).
func meanDuration(ds []time.Duration) time.Duration {
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	return time.Duration(math.Round(sum / float64(len(ds))))
}

// startNoise is the makespan below which a run's unexplained time is
// mostly its fixed start, and above which it is mostly the drift of its
// per-op costs.
const startNoise = 100 * time.Microsecond

// startWeight is how much a run estimated at est (without its start) says
// about the fixed cost of a run's start, for a model that several specs
// teach. What the estimate leaves unexplained is the start plus the drift
// of every per-op cost, and that drift grows with the run: the host's
// submission speed on the H100 machine moved by a third between processes
// (BENCHMARKS.md), which is 1-2 ms on an 800-op workload and nothing on a
// 100 us example. So each observation is weighed by the inverse of its
// variance, a fixed part plus one proportional to est: a short run counts
// fully, an 800-op one a thousandth.
func startWeight(est time.Duration) float64 {
	r := float64(est) / float64(startNoise)
	return 1 / (1 + r*r)
}

// save folds the runs' measurements into the model and writes it
// atomically (planner.PerfModel.Save). A file that could not be used is
// left alone.
func (pm *perfModel) save() (perfModelReport, error) {
	r := perfModelReport{Path: pm.path, Measured: pm.covered, Ops: pm.ops, Samples: len(pm.samples)}
	if !pm.usable || (len(pm.samples) == 0 && len(pm.overheads) == 0 && len(pm.replays) == 0) {
		return r, nil
	}
	if err := pm.model.Update(pm.samples); err != nil {
		return r, err
	}
	names := make([]planner.Overhead, 0, len(pm.overheads))
	for name := range pm.overheads {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, d := range pm.overheads[name] {
			if err := pm.model.ObserveOverhead(name, d); err != nil {
				return r, err
			}
		}
	}
	if err := pm.learnStarts(); err != nil {
		return r, err
	}
	if err := pm.model.Save(pm.path); err != nil {
		return r, err
	}
	r.Updated = true
	return r, nil
}

// makespanReport is estimated against measured makespan of dagrun run.
type makespanReport struct {
	Mode        string  `json:"mode"` // eager or replay
	EstimatedNS int64   `json:"estimated_ns"`
	MeasuredNS  int64   `json:"measured_ns"`
	Ratio       float64 `json:"ratio"` // estimated / measured
	// MeasuredQ1NS, MeasuredMedianNS and MeasuredQ3NS are the quartiles
	// of the timed eager runs' wall times, whose mean is MeasuredNS: how
	// much the same plan moves from run to run (the host's submission,
	// mostly).
	MeasuredQ1NS     int64 `json:"measured_q1_ns,omitempty"`
	MeasuredMedianNS int64 `json:"measured_median_ns,omitempty"`
	MeasuredQ3NS     int64 `json:"measured_q3_ns,omitempty"`
	// DeviceNS (eager) is the estimate without the host's costs: the
	// device's own work, in the plan's order. HostBound says the estimate
	// exceeds it by a tenth or more: the host's submission speed sets the
	// run's makespan, and that speed drifts (by up to 1.8x within tens of
	// milliseconds on the H100 machine, BENCHMARKS.md), so such a run is
	// only as steady as its host; a replay (--graph) does not depend on it.
	DeviceNS  int64 `json:"device_only_ns,omitempty"`
	HostBound bool  `json:"host_bound,omitempty"`
	// Source says what measured is: the mean wall time of the untraced
	// eager runs (the per-op costs a model learns are means too), or the
	// replays' time each.
	Source string `json:"source"`
}

// makespanOf compares the plan's estimate under perf model m with what the
// runs measured: a replay's time each (replayClock), or the wall time of
// the untraced eager runs after the warm-up (hostRuns; their mean and
// quartiles). An eager run is judged host-bound only where m has measured
// the host's submission of every kind of op the plan has.
func makespanOf(p *planner.Plan, m *planner.PerfModel, g *graphReport, eager []time.Duration) *makespanReport {
	r := &makespanReport{Mode: p.Stats.Mode.String(), EstimatedNS: p.Stats.Makespan.Nanoseconds()}
	switch {
	case g != nil && g.Replays > 0:
		r.MeasuredNS, r.Source = g.PerReplayNS, "time per replay launched back to back, after the warm-up"
	case len(eager) > 0:
		if hostMeasured(p, m) {
			dev := planner.Simulate(p, planner.WithOverheads(m, planner.Overheads{}), planner.Eager).Makespan
			r.DeviceNS, r.HostBound = dev.Nanoseconds(), p.Stats.Makespan >= dev+dev/10
		}
		ms := slices.Sorted(slices.Values(eager))
		r.MeasuredNS, r.Source = meanDuration(ms).Nanoseconds(), "mean wall time of the untraced runs after the warm-up"
		if len(ms) >= 4 {
			r.MeasuredQ1NS, r.MeasuredMedianNS, r.MeasuredQ3NS = ms[len(ms)/4].Nanoseconds(), ms[len(ms)/2].Nanoseconds(), ms[3*len(ms)/4].Nanoseconds()
		}
	default:
		return nil
	}
	if r.MeasuredNS > 0 {
		r.Ratio = float64(r.EstimatedNS) / float64(r.MeasuredNS)
	}
	return r
}

// hostMeasured reports whether m has measured the host's cost to submit
// every kind of op in p.
func hostMeasured(p *planner.Plan, m *planner.PerfModel) bool {
	if m == nil {
		return false
	}
	for _, op := range p.Graph.Ops {
		if _, ok := m.Overhead(planner.SubmitOverhead(op.Kind)); !ok {
			return false
		}
	}
	return true
}

func (r *makespanReport) write(w io.Writer) {
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
func writePerfModel(w io.Writer, prefix string, pm *perfModel, m *makespanReport, pr *perfModelReport) {
	fmt.Fprintln(w, prefix+pm.coverage())
	if m != nil {
		fmt.Fprint(w, prefix)
		m.write(w)
	}
	if pr != nil {
		if pr.Updated {
			fmt.Fprintf(w, "%sperf model %s updated from %d op samples\n", prefix, pr.Path, pr.Samples)
		} else {
			fmt.Fprintf(w, "%sperf model %s not updated\n", prefix, pr.Path)
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
	var mach machine
	if err == nil {
		mach, err = machineOf(b, s.Graph)
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
	r, err := json.Marshal(perfModelReport{Path: pm.path, Measured: pm.covered, Ops: pm.ops})
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
	var cost planner.CostModel = planner.DefaultCost()
	if pm != nil {
		cost = pm.model
	}
	c := trace.ComparePlan(p, cost, runMode(graph), runs[len(runs)-1].Spans)
	return &c
}
