package profile

import (
	"fmt"
	"slices"
	"time"

	"github.com/dagrun/dagrun/internal/human"
	"github.com/dagrun/dagrun/planner"
	"github.com/dagrun/dagrun/planner/perf"
)

// Makespan is a plan's estimated makespan against the measured one.
type Makespan struct {
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
	// only as steady as its host; a replay does not depend on it.
	DeviceNS  int64 `json:"device_only_ns,omitempty"`
	HostBound bool  `json:"host_bound,omitempty"`
	// Source says what measured is: the mean wall time of the untraced
	// eager runs (the per-op costs a model learns are means too), or the
	// replays' time each.
	Source string `json:"source"`
}

// Compare sets the estimate of plan p under model m against what the runs
// measured: perReplay, a replay's time each, when not 0, else the wall
// times of the untraced eager runs after the warm-up (their mean and
// quartiles). An eager run is judged host-bound only where m has measured
// the host's submission of every kind of op the plan has. Nil when
// nothing was measured.
func Compare(p *planner.Plan, m *perf.PerfModel, perReplay time.Duration, eager []time.Duration) *Makespan {
	r := &Makespan{Mode: p.Stats.Mode.String(), EstimatedNS: p.Stats.Makespan.Nanoseconds()}
	switch {
	case perReplay > 0:
		r.MeasuredNS, r.Source = perReplay.Nanoseconds(), "time per replay launched back to back, after the warm-up"
	case len(eager) > 0:
		if hostMeasured(p, m) {
			dev := perf.Simulate(p, perf.WithOverheads(m, perf.Overheads{}), planner.Eager).Makespan
			r.DeviceNS, r.HostBound = dev.Nanoseconds(), p.Stats.Makespan >= dev+dev/10
		}
		ms := slices.Sorted(slices.Values(eager))
		r.MeasuredNS, r.Source = mean(ms).Nanoseconds(), "mean wall time of the untraced runs after the warm-up"
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
func hostMeasured(p *planner.Plan, m *perf.PerfModel) bool {
	if m == nil {
		return false
	}
	for _, op := range p.Graph.Ops {
		if _, ok := m.Overhead(perf.SubmitOverhead(op.Kind)); !ok {
			return false
		}
	}
	return true
}

// String says m in a line, "makespan (MODE): estimated ..., measured ...",
// and a second one when the run is host-bound.
func (m *Makespan) String() string {
	spread := ""
	if m.MeasuredQ3NS > 0 {
		spread = fmt.Sprintf("; quartiles %s, %s, %s", ns(m.MeasuredQ1NS), ns(m.MeasuredMedianNS), ns(m.MeasuredQ3NS))
	}
	s := fmt.Sprintf("makespan (%s): estimated %s, measured %s (estimate/measured %.2f; measured: %s%s)",
		m.Mode, ns(m.EstimatedNS), ns(m.MeasuredNS), m.Ratio, m.Source, spread)
	if m.HostBound {
		s += fmt.Sprintf("\n  host-bound: the device's own work is %s of the estimate; the host's submission speed sets the rest and drifts, so learn and measure over a second or more of runs (--repeat); --graph replays do not depend on it",
			ns(m.DeviceNS))
	}
	return s
}

func ns(n int64) string { return human.Duration(time.Duration(n)) }
