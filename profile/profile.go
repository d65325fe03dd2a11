// Package profile teaches a perf model (perf.PerfModel) from measured
// runs: the ops' durations from traced runs, the host's submission costs
// and the wall time of untraced runs, and from those the fixed cost of a
// run's start, eager and replayed.
//
// A Learner holds one perf-model file of one device. Load it, plan with
// its Model (planner.Cost) and tell it the plan (Planned); run the
// plan traced and pass each run's spans to Observe; run it as many times
// again untraced (Untraced, or your own loop calling ObserveHost) for the
// host's costs; pass a graph's time per replay to ObserveReplay. An
// executor.Runner does both loops: give it ObserveRun as its observer. Save
// folds it all into the model and writes the file whole. Compare sets the
// plan's estimate against what the runs measured.
//
// The first half of several runs warms up (modules, memory pools, caches,
// the clocks of an idle device and host) and teaches nothing: Warmups.
//
// Before any run, EstimateCPU says roughly how long a graph takes on the
// CPU backend, from its GEMMs' FLOPs and its other ops' bytes at rates
// measured once.
package profile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/executor/device"
	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
	"github.com/dagrun/dagrun/trace"
)

// Learner is a loaded perf-model file and what the runs taught it.
type Learner struct {
	Path  string
	Model *perf.PerfModel
	// Unusable says why the file could not be used (corrupt, of another
	// device or version; a *perf.PerfModelError), or is nil. Model is
	// then empty, so plans use default costs, and Save leaves the file
	// as it is.
	Unusable error
	// Covered of Ops ops were costed from measurements in the plan.
	Covered, Ops int

	samples   []perf.OpSample
	overheads map[perf.Overhead][]time.Duration
	// plan is the plan the runs ran; eager and replays are the wall times
	// of its untraced eager runs and its time per replay, from which Save
	// learns the fixed cost of a run's start.
	plan    *planner.Plan
	eager   []time.Duration
	replays []time.Duration
}

// Key is the perf-model key of device dev of backend b: a backend that
// names its devices (cuda) keys by the device's name, multiprocessors and
// driver; one that does not (cpu) is this host's CPU with its cores.
func Key(b device.Backend, dev int) (perf.DeviceKey, error) {
	n, ok := b.(device.Describer)
	if !ok {
		return perf.DeviceKey{Name: "cpu", SMs: runtime.NumCPU()}, nil
	}
	name, sms, err := n.DeviceInfo(dev)
	if err != nil {
		return perf.DeviceKey{}, err
	}
	return perf.DeviceKey{Name: name, SMs: sms, Driver: n.DriverVersion()}, nil
}

// Load reads the perf-model file at path (a missing file is an empty
// model) for the device key names. A file that cannot be used is no
// error: Unusable then says why.
func Load(path string, key perf.DeviceKey) (*Learner, error) {
	m, err := perf.LoadPerfModel(path, key, nil)
	l := &Learner{Path: path, Model: m, overheads: map[perf.Overhead][]time.Duration{}}
	if err != nil {
		if _, ok := errors.AsType[*perf.PerfModelError](err); !ok {
			return nil, err
		}
		l.Unusable = err
	}
	return l, nil
}

// Planned tells l the plan its runs will run (planned with l.Model as its
// cost) and counts the ops costed from measurements.
func (l *Learner) Planned(p *planner.Plan) {
	l.plan = p
	l.Covered, l.Ops = l.Model.Covered(p.Graph.Ops), len(p.Graph.Ops)
}

// Warmups is how many of repeat runs warm up and are left out of what is
// measured and learned. On the H100 the small examples' runs took three
// or four runs to settle, so the first half of the runs warm up (at least
// the first of several).
func Warmups(repeat int) int {
	if repeat <= 1 {
		return 0
	}
	return max(1, repeat/2)
}

// Observe keeps what traced run number run (from 1) of repeat measured:
// the durations of g's ops. The host's costs come from untraced runs
// (ObserveHost): tracing op by op slows the host's submission.
func (l *Learner) Observe(g *dag.Graph, spans []executor.Span, run, repeat int) error {
	if run <= Warmups(repeat) {
		return nil
	}
	samples, err := trace.PerfSamples(g, spans)
	if err != nil {
		return err
	}
	l.samples = append(l.samples, samples...)
	return nil
}

// ObserveHost keeps what untraced run number run (from 1) of repeat of
// sess measured: its wall time, from Run to the end of its work (the
// makespan a program sees), and the host's submission costs of its steps
// (sess opened with executor.WithSubmitTiming).
func (l *Learner) ObserveHost(sess *executor.Session, wall time.Duration, run, repeat int) {
	if run <= Warmups(repeat) {
		return
	}
	l.eager = append(l.eager, wall)
	costs, ok := sess.SubmitCosts()
	if !ok {
		return
	}
	for k, c := range costs.Ops {
		if c.Count > 0 {
			name := perf.SubmitOverhead(k)
			l.overheads[name] = append(l.overheads[name], c.Mean())
		}
	}
	if costs.Records.Count > 0 {
		l.overheads[perf.OverheadRecord] = append(l.overheads[perf.OverheadRecord], costs.Records.Mean())
	}
	if costs.Waits.Count > 0 {
		l.overheads[perf.OverheadWait] = append(l.overheads[perf.OverheadWait], costs.Waits.Mean())
	}
}

// ObserveReplay keeps the measured time per replay (launched back to
// back, after the warm-up) of the plan, from which Save learns a replay's
// fixed start.
func (l *Learner) ObserveReplay(each time.Duration) {
	if each > 0 {
		l.replays = append(l.replays, each)
	}
}

// Eager is the wall times of the untraced runs after the warm-up.
func (l *Learner) Eager() []time.Duration { return l.eager }

// ObserveRun keeps what an executor.Runner's run of the plan told Planned
// measured (pass it to executor.WithObserver), as number o.Run of repeat:
// a traced run's op durations (Observe), or an untraced run's wall time
// and submission costs (ObserveHost). A run is traced when its session
// times ops (executor.WithTiming).
func (l *Learner) ObserveRun(o executor.Observation, repeat int) error {
	if src, _, _ := o.Session.TimingSource(); src != "" {
		if l.plan == nil {
			return errors.New("profile: ObserveRun before Planned: the learner has no plan to map spans to")
		}
		return l.Observe(l.plan.Graph, o.Spans, o.Run, repeat)
	}
	l.ObserveHost(o.Session, o.Wall, o.Run, repeat)
	return nil
}

// Untraced calls run repeat times, passing each run's wall time and number
// (from 1) to observe, for a Learner's ObserveHost. It stops at the first
// failing run.
func Untraced(ctx context.Context, repeat int, run func(context.Context) error, observe func(wall time.Duration, run int)) error {
	for n := 1; n <= repeat; n++ {
		start := time.Now()
		if err := run(ctx); err != nil {
			return err
		}
		observe(time.Since(start), n)
	}
	return nil
}

// Update is what Save did.
type Update struct {
	Path     string `json:"path"`
	Measured int    `json:"ops_measured"`
	Ops      int    `json:"ops"`
	Updated  bool   `json:"updated"`
	Samples  int    `json:"samples,omitempty"`
}

// String says what Save did in a line.
func (u Update) String() string {
	if u.Updated {
		return fmt.Sprintf("perf model %s updated from %d op samples", human.Quote(u.Path), u.Samples)
	}
	return fmt.Sprintf("perf model %s not updated", human.Quote(u.Path))
}

// Coverage says in a line how much of the plan the model costed from
// measurements (Planned).
func (l *Learner) Coverage() string {
	return fmt.Sprintf("perf model %s: %d of %d ops costed from measurements", human.Quote(l.Path), l.Covered, l.Ops)
}

// Save folds the runs' measurements into the model and writes it whole
// (perf.PerfModel.Save). An unusable file, or runs that measured
// nothing, leave the file alone.
func (l *Learner) Save() (Update, error) {
	r := Update{Path: l.Path, Measured: l.Covered, Ops: l.Ops, Samples: len(l.samples)}
	if l.Unusable != nil || (len(l.samples) == 0 && len(l.overheads) == 0 && len(l.replays) == 0) {
		return r, nil
	}
	if err := l.Model.Update(l.samples); err != nil {
		return r, err
	}
	for _, name := range slices.Sorted(maps.Keys(l.overheads)) {
		for _, d := range l.overheads[name] {
			if err := l.Model.ObserveOverhead(name, d); err != nil {
				return r, err
			}
		}
	}
	if err := l.learnStarts(); err != nil {
		return r, err
	}
	if err := l.Model.Save(l.Path); err != nil {
		return r, err
	}
	r.Updated = true
	return r, nil
}

// learnStarts folds into the model the fixed cost of a run's start, eager
// and replayed: the mean measured makespan less the model's estimate of
// the plan without that cost (never below zero). The per-op costs
// (durations, submissions, events, a replay's per node) are measured
// apart, so what is left is what every run pays once: the host's setup of
// a run, the launch of a graph. The model's op costs must be updated
// first.
func (l *Learner) learnStarts() error {
	if l.plan == nil {
		return nil
	}
	learn := func(name perf.Overhead, mode planner.Mode, measured []time.Duration) error {
		if len(measured) == 0 {
			return nil
		}
		o := l.Model.Overheads()
		o.Start, o.ReplayStart = 0, 0
		est := perf.Simulate(l.plan, perf.WithOverheads(l.Model, o), mode).Makespan
		// One observation per call, of the mean over its runs: the model's
		// per-op costs are means over the same runs, so where the host's
		// speed moved between runs (it does, on the H100 machine, by up to
		// 1.8x), both count each run alike and the difference is the fixed
		// cost alone; a median would pick one of the speeds.
		return l.Model.ObserveOverheadWeighted(name, max(mean(measured)-est, 0), startWeight(est))
	}
	if err := learn(perf.OverheadStart, planner.Eager, l.eager); err != nil {
		return err
	}
	return learn(perf.OverheadReplayStart, planner.Replay, l.replays)
}

// mean is the mean of ds (not empty).
func mean(ds []time.Duration) time.Duration {
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
