package perf

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/internal/human"
)

// DeviceKey names the device a perf model was measured on: durations of one
// device say little about another, nor about another slice of the same one
// (MIG) or another driver.
type DeviceKey struct {
	Name   string `json:"name"`          // for example "NVIDIA H100 80GB HBM3", or "cpu"
	SMs    int    `json:"sms"`           // multiprocessors (cores for the CPU backend)
	MIG    string `json:"mig,omitempty"` // the MIG profile, "" for a whole device
	Driver int    `json:"driver"`        // cuDriverGetVersion, for example 13000
}

func (k DeviceKey) String() string {
	s := fmt.Sprintf("%s, %d SMs, driver %d", human.Quote(k.Name), k.SMs, k.Driver)
	if k.MIG != "" {
		s += ", MIG " + human.Quote(k.MIG)
	}
	return s
}

// PerfStats summarise repeated measurements of one thing with Welford's
// running mean and spread, in nanoseconds. Measurements may carry weights
// (AddWeighted): the mean is then weighted, and Weight is their sum; a
// Weight of zero (every file before weights, and stats only ever Added)
// means one per measurement.
type PerfStats struct {
	Count  int64   `json:"count"`
	MeanNs float64 `json:"mean_ns"`
	M2     float64 `json:"m2"` // the (weighted) sum of squared distances from the mean
	MinNs  float64 `json:"min_ns"`
	MaxNs  float64 `json:"max_ns"`
	Weight float64 `json:"weight,omitempty"`
}

// Add folds one measurement in.
func (s *PerfStats) Add(ns float64) {
	if s.Weight == 0 {
		s.add(ns, 1, float64(s.Count)+1)
		return
	}
	s.AddWeighted(ns, 1)
}

// AddWeighted folds one measurement of weight w (> 0) in: one that counts w
// times as much as a measurement of weight 1 (West's weighted update).
func (s *PerfStats) AddWeighted(ns, w float64) {
	if s.Weight == 0 {
		s.Weight = float64(s.Count) // each earlier one weighed 1
	}
	s.Weight += w
	s.add(ns, w, s.Weight)
}

// add updates the mean and spread with ns of weight w, total the weights
// with it.
func (s *PerfStats) add(ns, w, total float64) {
	if s.Count == 0 {
		// Exactly, not by the update: (ns * w) / w need not round to ns.
		s.Count, s.MeanNs, s.M2, s.MinNs, s.MaxNs = 1, ns, 0, ns, ns
		return
	}
	s.Count++
	d := ns - s.MeanNs
	// Rounding may put a weighted mean a hair outside [min, max] and make
	// the spread a hair negative; a file must never hold either.
	s.MinNs = min(s.MinNs, ns)
	s.MaxNs = max(s.MaxNs, ns)
	s.MeanNs = min(max(s.MeanNs+d*w/total, s.MinNs), s.MaxNs)
	s.M2 = max(s.M2+w*d*(ns-s.MeanNs), 0)
}

// Mean is the (weighted) mean measurement.
func (s PerfStats) Mean() time.Duration { return time.Duration(math.Round(s.MeanNs)) }

// Std is the sample standard deviation, zero below two measurements.
func (s PerfStats) Std() time.Duration {
	if s.Count < 2 {
		return 0
	}
	v := s.M2 / float64(s.Count-1)
	if s.Weight > 0 { // reliability weights: the weighted variance, corrected as for Count samples
		v = s.M2 / s.Weight * float64(s.Count) / float64(s.Count-1)
	}
	return time.Duration(math.Round(math.Sqrt(v)))
}

func (s PerfStats) check() error {
	for _, v := range []float64{s.MeanNs, s.M2, s.MinNs, s.MaxNs, s.Weight} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("a statistic is %v", v)
		}
	}
	switch {
	case s.Count < 1 || s.Count > 1<<53:
		return fmt.Errorf("count %d is out of range", s.Count)
	case s.MaxNs > float64(maxMeasured):
		return fmt.Errorf("max_ns %g exceeds %v", s.MaxNs, maxMeasured)
	case s.MinNs > s.MaxNs || s.MeanNs < s.MinNs*(1-1e-9) || s.MeanNs > s.MaxNs*(1+1e-9):
		return fmt.Errorf("mean %g is not between min %g and max %g", s.MeanNs, s.MinNs, s.MaxNs)
	}
	return nil
}

// Overhead names a per-device cost that is no op's duration: recording an
// event, making a stream wait, and submitting an op of one kind from the
// host.
type Overhead string

const (
	OverheadRecord Overhead = "record" // an event record
	OverheadWait   Overhead = "wait"   // a wait for an event
	// OverheadReplayOp is a graph replay's time per op node beyond the
	// nodes' own durations: the replay's measured makespan less the
	// device-only estimate, over its ops.
	OverheadReplayOp Overhead = "replay op"
	// OverheadStart and OverheadReplayStart are a run's fixed costs before
	// its first step (Overheads.Start, ReplayStart): a run's measured
	// makespan less the model's estimate of it without them.
	OverheadStart       Overhead = "run start"
	OverheadReplayStart Overhead = "replay start" // see OverheadStart
)

// SubmitOverhead is the host's cost to submit one op of kind k.
func SubmitOverhead(k dag.OpKind) Overhead { return Overhead("submit " + k.String()) }

// PerfModel holds measured durations of ops by signature (see Signature)
// and the device's measured overheads, and estimates ops from them: it is a
// CostModel. Ops it has not measured are costed by its fallback. Duration,
// Measured, Covered and OpStats may run concurrently; Update and
// ObserveOverhead must run alone.
type PerfModel struct {
	Device DeviceKey
	// World is the number of ranks the model's collectives run among
	// (0: not known). It is part of a collective's signature: an all-reduce
	// of 2 ranks is not one of 8, and one file may hold both.
	World     int
	ops       map[string]*opEntry
	overheads map[Overhead]*PerfStats
	fits      map[string]copyFit // by copy direction
	fallback  CostModel
	hashes    sync.Map // *dag.Kernel -> its kernelHash
}

type opEntry struct {
	Kind      string `json:"kind"`
	Direction string `json:"direction,omitempty"` // copies
	Bytes     int64  `json:"bytes"`
	PerfStats
}

// copyFit is a copy direction's latency + bytes/bandwidth, fitted by
// weighted least squares to the measured sizes, and the range of sizes it
// was fitted to.
type copyFit struct {
	latencyNs, nsPerByte float64
	minBytes, maxBytes   int64
	minSig, maxSig       string // the entries measured at minBytes and maxBytes
}

// MaxExtrapolation is how far beyond the sizes its direction's copies were
// measured at a copy is costed from their fitted bandwidth: up to this
// factor larger than the largest, or smaller than the smallest. Beyond it
// the fallback model costs the copy (and Extrapolations says why): a fit
// to a few hostile or noisy entries must not decide a plan.
const MaxExtrapolation = 16

// estimate is the fit's time for a copy of n bytes, saturated at the
// per-op cap of measurements, and whether n is in the fit's range.
func (f copyFit) estimate(n int64) (time.Duration, bool) {
	if float64(n) > float64(f.maxBytes)*MaxExtrapolation || float64(n)*MaxExtrapolation < float64(f.minBytes) {
		return 0, false
	}
	ns := f.latencyNs + f.nsPerByte*float64(n)
	if !(ns < float64(maxMeasured)) {
		return maxMeasured, true
	}
	return max(time.Duration(math.Round(ns)), 0), true
}

// NewPerfModel returns an empty model of device dev that costs every op
// with fallback (DefaultCost when nil) until it has measured it.
func NewPerfModel(dev DeviceKey, fallback CostModel) *PerfModel {
	if fallback == nil {
		fallback = DefaultCost()
	}
	return &PerfModel{Device: dev, ops: map[string]*opEntry{}, overheads: map[Overhead]*PerfStats{},
		fits: map[string]copyFit{}, fallback: fallback}
}

// Duration is op's measured mean where the model has one (a measurement
// wins over the op's Cost hint), a copy's time from its direction's fitted
// bandwidth, else the fallback's estimate.
func (m *PerfModel) Duration(op *dag.Op) time.Duration {
	if d, ok := m.Measured(op); ok {
		return d
	}
	if m.fallback == nil { // the zero PerfModel: as NewPerfModel(dev, nil)
		return DefaultCost().Duration(op)
	}
	return m.fallback.Duration(op)
}

// Measured is op's duration from measurements, and whether the model has
// one: the mean of its signature, or for a copy of a size not measured, its
// direction's fit.
func (m *PerfModel) Measured(op *dag.Op) (time.Duration, bool) {
	sig, err := m.signature(op)
	if err != nil {
		return 0, false
	}
	if e, ok := m.ops[sig]; ok {
		return e.Mean(), true
	}
	if op.Kind == dag.Copy {
		if f, ok := m.fits[copyPath(op.Access[0].Buf, op.Access[1].Buf)]; ok {
			return f.estimate(op.Bytes())
		}
	}
	return 0, false
}

// Extrapolations says, once per copy direction, which copies of ops the
// model will not cost from its fitted bandwidth because they lie more than
// MaxExtrapolation beyond the sizes measured, naming the entries the fit
// rests on.
func (m *PerfModel) Extrapolations(ops []*dag.Op) []string {
	var out []string
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Kind != dag.Copy || len(op.Access) < 2 {
			continue
		}
		dir := copyPath(op.Access[0].Buf, op.Access[1].Buf)
		f, ok := m.fits[dir]
		if !ok || seen[dir] {
			continue
		}
		if sig, err := m.signature(op); err == nil && m.ops[sig] != nil {
			continue // measured itself
		}
		if _, ok := f.estimate(op.Bytes()); ok {
			continue
		}
		seen[dir] = true
		out = append(out, fmt.Sprintf("copy %s of %d bytes lies more than %dx outside the sizes the perf model measured %s copies at (%d bytes, entry %q, to %d bytes, entry %q): it is costed by the fallback model, not extrapolated; measure copies of its size",
			op.Name, op.Bytes(), MaxExtrapolation, dir, f.minBytes, f.minSig, f.maxBytes, f.maxSig))
	}
	return out
}

// Covered counts the ops of ops that the model costs from measurements:
// what a plan reports as costed from measurements.
func (m *PerfModel) Covered(ops []*dag.Op) int {
	n := 0
	for _, op := range ops {
		if _, ok := m.Measured(op); ok {
			n++
		}
	}
	return n
}

// Overhead is the measured mean of o, and whether it was measured.
func (m *PerfModel) Overhead(o Overhead) (time.Duration, bool) {
	if s, ok := m.overheads[o]; ok {
		return s.Mean(), true
	}
	return 0, false
}

// Overheads are the model's measured overheads where it has them, its
// fallback's (OverheadsOf) otherwise: it is an OverheadModel, so Simulate
// charges the host's submission and the events as measured. Submit is the
// mean over every op kind's measured submissions, weighted by their counts,
// for the kinds it has not measured; SubmitKinds holds each measured
// kind's own.
func (m *PerfModel) Overheads() Overheads {
	o := OverheadsOf(m.fallback)
	if d, ok := m.Overhead(OverheadRecord); ok {
		o.Record = d
	}
	if d, ok := m.Overhead(OverheadWait); ok {
		o.Wait = d
	}
	if d, ok := m.Overhead(OverheadReplayOp); ok {
		o.ReplayOp = d
	}
	if d, ok := m.Overhead(OverheadStart); ok {
		o.Start = d
	}
	if d, ok := m.Overhead(OverheadReplayStart); ok {
		o.ReplayStart = d
	}
	var n int64
	var sum float64
	for name, s := range m.overheads {
		if strings.HasPrefix(string(name), "submit ") {
			n += s.Count
			sum += s.MeanNs * float64(s.Count)
		}
	}
	if n > 0 {
		o.Submit = time.Duration(math.Round(sum / float64(n)))
	}
	for _, k := range dag.OpKinds() {
		if d, ok := m.Overhead(SubmitOverhead(k)); ok {
			if o.SubmitKinds == nil {
				o.SubmitKinds = map[dag.OpKind]time.Duration{}
			}
			o.SubmitKinds[k] = d
		}
	}
	return o
}

// OpStats are the measurements of op's signature, if any.
func (m *PerfModel) OpStats(op *dag.Op) (PerfStats, bool) {
	sig, err := m.signature(op)
	if err != nil {
		return PerfStats{}, false
	}
	if e, ok := m.ops[sig]; ok {
		return e.PerfStats, true
	}
	return PerfStats{}, false
}

// Len is the number of op signatures measured.
func (m *PerfModel) Len() int { return len(m.ops) }

// OpSample is one measured run of an op (from a trace's span: end - start).
type OpSample struct {
	Op       *dag.Op
	Duration time.Duration
}

// Update folds samples into the model. It checks every sample first, so a
// bad one (no op, a negative or implausible duration, an op with no
// signature) changes nothing and is named in the error.
func (m *PerfModel) Update(samples []OpSample) error {
	sigs := make([]string, len(samples))
	for i, s := range samples {
		if s.Op == nil {
			return fmt.Errorf("perf model update: sample %d has no op", i)
		}
		if s.Duration < 0 || s.Duration > maxMeasured {
			return fmt.Errorf("perf model update: op %s: duration %v is not between 0 and %v", s.Op.Name, s.Duration, maxMeasured)
		}
		sig, err := m.signature(s.Op)
		if err != nil {
			return fmt.Errorf("perf model update: %w", err)
		}
		sigs[i] = sig
	}
	for i, s := range samples {
		e := m.ops[sigs[i]]
		if e == nil {
			e = &opEntry{Kind: s.Op.Kind.String(), Bytes: s.Op.Bytes()}
			if s.Op.Kind == dag.Copy {
				e.Direction = copyPath(s.Op.Access[0].Buf, s.Op.Access[1].Buf)
			}
			m.ops[sigs[i]] = e
		}
		e.Add(float64(s.Duration))
	}
	m.refit()
	return nil
}

// ObserveOverhead folds one measurement of o into the model.
func (m *PerfModel) ObserveOverhead(o Overhead, d time.Duration) error {
	s, err := m.overheadStats(o, d)
	if err != nil {
		return err
	}
	s.Add(float64(d))
	return nil
}

// ObserveOverheadWeighted folds one measurement of o of weight w (0 < w <=
// 1) into the model, where measurements are not equally reliable: the fixed
// cost of a run's start, measured as what a long run's per-op costs leave
// unexplained, is lost in their noise, and a short run says more about it.
func (m *PerfModel) ObserveOverheadWeighted(o Overhead, d time.Duration, w float64) error {
	if !(w > 0 && w <= 1) {
		return fmt.Errorf("perf model: overhead %s: weight %v is not in (0, 1]", o, w)
	}
	s, err := m.overheadStats(o, d)
	if err != nil {
		return err
	}
	s.AddWeighted(float64(d), w)
	return nil
}

// overheadStats checks a measurement d of o and returns o's stats, new
// if need be.
func (m *PerfModel) overheadStats(o Overhead, d time.Duration) (*PerfStats, error) {
	if o == "" {
		return nil, errors.New("perf model: an overhead needs a name")
	}
	if d < 0 || d > maxMeasured {
		return nil, fmt.Errorf("perf model: overhead %s: duration %v is not between 0 and %v", o, d, maxMeasured)
	}
	s := m.overheads[o]
	if s == nil {
		s = &PerfStats{}
		m.overheads[o] = s
	}
	return s, nil
}

// refit fits latency and bandwidth per copy direction to the copies
// measured at two sizes or more.
func (m *PerfModel) refit() {
	type points struct {
		x, y, w        []float64
		minSig, maxSig string
		lo, hi         int64
	}
	by := map[string]*points{}
	// In signature order, so that the same model always fits the same
	// figures (float sums depend on their order).
	for _, sig := range slices.Sorted(maps.Keys(m.ops)) {
		e := m.ops[sig]
		if e.Direction == "" {
			continue
		}
		p := by[e.Direction]
		if p == nil {
			p = &points{}
			by[e.Direction] = p
		}
		if len(p.x) == 0 || e.Bytes < p.lo {
			p.lo, p.minSig = e.Bytes, sig
		}
		if len(p.x) == 0 || e.Bytes > p.hi {
			p.hi, p.maxSig = e.Bytes, sig
		}
		p.x = append(p.x, float64(e.Bytes))
		p.y = append(p.y, e.MeanNs)
		p.w = append(p.w, float64(e.Count))
	}
	m.fits = map[string]copyFit{}
	for dir, p := range by {
		if len(p.x) < 2 || slices.Min(p.x) == slices.Max(p.x) {
			continue
		}
		alpha, beta := stat.LinearRegression(p.x, p.y, p.w, false)
		if !(beta > 0) || math.IsInf(beta, 0) || math.IsNaN(alpha) {
			continue // copies that do not get slower with size fit no bandwidth
		}
		m.fits[dir] = copyFit{latencyNs: max(alpha, 0), nsPerByte: beta, minBytes: p.lo, maxBytes: p.hi, minSig: p.minSig, maxSig: p.maxSig}
	}
}

// CopyFit is direction's fitted latency and bandwidth (bytes per second),
// if the model has measured copies of two sizes or more in it.
func (m *PerfModel) CopyFit(direction string) (latency time.Duration, bytesPerSecond float64, ok bool) {
	f, ok := m.fits[direction]
	if !ok {
		return 0, 0, false
	}
	return time.Duration(math.Round(f.latencyNs)), 1e9 / f.nsPerByte, true
}
