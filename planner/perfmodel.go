package planner

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/dagrun/dagrun/dag"
)

// Perf-model files: what Save writes and LoadPerfModel accepts. Version 2
// holds the host's costs of untraced runs (version 1's were of runs traced
// op by op, slower by the tracer's cost per op).
const (
	PerfModelFormat  = "dagrun-perf-model"
	PerfModelVersion = 2

	maxPerfModelBytes = 64 << 20 // a file larger than this is refused as corrupt
	// maxMeasured bounds a measured duration: longer ones are refused as
	// clock errors rather than folded into a mean.
	maxMeasured = time.Hour
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
	s := fmt.Sprintf("%s, %d SMs, driver %d", k.Name, k.SMs, k.Driver)
	if k.MIG != "" {
		s += ", MIG " + k.MIG
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
	OverheadRecord Overhead = "record"
	OverheadWait   Overhead = "wait"
	// OverheadReplayOp is a graph replay's time per op node beyond the
	// nodes' own durations: the replay's measured makespan less the
	// device-only estimate, over its ops.
	OverheadReplayOp Overhead = "replay op"
	// OverheadStart and OverheadReplayStart are a run's fixed costs before
	// its first step (Overheads.Start, ReplayStart): a run's measured
	// makespan less the model's estimate of it without them.
	OverheadStart       Overhead = "run start"
	OverheadReplayStart Overhead = "replay start"
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

// Signature is the key under which op's durations are kept: ops with one
// signature are expected to take the same time on one device. Each kind has
// its rule in signatureRules.
func Signature(op *dag.Op) (string, error) { return signature(op, kernelHash) }

func signature(op *dag.Op, hash func(*dag.Kernel) string) (string, error) {
	rule, ok := signatureRules[op.Kind]
	if !ok {
		return "", fmt.Errorf("op %s: no perf-model signature rule for kind %s", op.Name, op.Kind)
	}
	return rule(op, hash)
}

// signature is Signature with kernel hashes kept between calls: hashing a
// kernel's source for every op it launches would dominate planning.
func (m *PerfModel) signature(op *dag.Op) (string, error) {
	sig, err := signature(op, func(k *dag.Kernel) string {
		if h, ok := m.hashes.Load(k); ok {
			return h.(string)
		}
		h := kernelHash(k)
		m.hashes.Store(k, h)
		return h
	})
	if err == nil && m.World > 0 && op.Kind.IsCollective() {
		sig += fmt.Sprintf(" world=%d", m.World)
	}
	return sig, err
}

// kernelHash identifies a kernel's code: its source kind, entry point, file
// and CUDA C source.
func kernelHash(k *dag.Kernel) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s", k.Source, k.EntryName(), k.Path, k.Code)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// signatureRules, by op kind: what makes two ops of the kind take the same
// time. A new kind adds its rule here (TestSignatureRulesCoverKinds fails
// until it does).
// A rule gets hash, which identifies a kernel's code.
var signatureRules = map[dag.OpKind]func(op *dag.Op, hash func(*dag.Kernel) string) (string, error){
	dag.Alloc: memOpSignature,
	dag.Free:  memOpSignature,
	dag.Copy: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if len(op.Access) != 2 {
			return "", fmt.Errorf("op %s: a copy needs 2 accesses, has %d", op.Name, len(op.Access))
		}
		return fmt.Sprintf("copy %s %d", copyPath(op.Access[0].Buf, op.Access[1].Buf), op.Bytes()), nil
	},
	dag.Fill: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if len(op.Access) != 1 {
			return "", fmt.Errorf("op %s: a fill needs 1 access, has %d", op.Name, len(op.Access))
		}
		b := op.Access[0].Buf
		return fmt.Sprintf("fill %s %s %d", b.Placement, b.DType, op.Bytes()), nil
	},
	dag.Launch: launchSignature,
	dag.Host: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		// A host function has no identity but its op's name.
		return fmt.Sprintf("host %q %s", op.Name, accessSizes(op)), nil
	},
	dag.Gemm: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if op.Gemm == nil || len(op.Access) == 0 {
			return "", fmt.Errorf("op %s: a gemm without its shape", op.Name)
		}
		return fmt.Sprintf("gemm %s %s", op.Gemm, op.Access[0].Buf.DType), nil
	},
	dag.AllReduce:     collectiveSignature,
	dag.AllGather:     collectiveSignature,
	dag.ReduceScatter: collectiveSignature,
	dag.Broadcast:     collectiveSignature,
	dag.Send:          collectiveSignature,
	dag.Recv:          collectiveSignature,
	dag.Task: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		// A task's function has no identity but its op's name.
		return fmt.Sprintf("task %q %s", op.Name, accessSizes(op)), nil
	},
	dag.Memset2D: func(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
		if op.Memset2D == nil || len(op.Access) != 1 {
			return "", fmt.Errorf("op %s: a memset2d without its region", op.Name)
		}
		m, b := op.Memset2D, op.Access[0].Buf
		return fmt.Sprintf("memset2d %s %s %dx%d pitch %d", b.Placement, b.DType, m.Rows, m.Width, m.Pitch), nil
	},
}

// collectiveSignature: the kind, the bytes each rank moves and the dtype
// (a model that knows its world adds the world size: PerfModel.World).
func collectiveSignature(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
	if len(op.Access) == 0 {
		return "", fmt.Errorf("op %s: a collective without a view", op.Name)
	}
	return fmt.Sprintf("%s %s %s", op.Kind, op.Access[0].Buf.DType, accessSizes(op)), nil
}

func memOpSignature(op *dag.Op, _ func(*dag.Kernel) string) (string, error) {
	if len(op.Access) != 1 {
		return "", fmt.Errorf("op %s: an %s needs 1 access, has %d", op.Name, op.Kind, len(op.Access))
	}
	return fmt.Sprintf("%s %s %d", op.Kind, op.Access[0].Buf.Placement, op.Bytes()), nil
}

// launchSignature: the kernel (name, entry and a hash of its source or
// file), the launch shape, the scalar arguments (spin(10) is not spin(50))
// and the sizes of the buffers it touches.
func launchSignature(op *dag.Op, hash func(*dag.Kernel) string) (string, error) {
	l := op.Launch
	if l == nil || l.Kernel == nil {
		return "", fmt.Errorf("op %s: a launch without a kernel", op.Name)
	}
	b := make([]byte, 0, 128)
	b = append(b, "launch "...)
	b = append(b, l.Kernel.Name...)
	b = append(b, " src="...)
	b = append(b, hash(l.Kernel)...)
	b = appendDim(append(b, " grid="...), l.Grid)
	b = appendDim(append(b, " block="...), l.Block)
	b = strconv.AppendInt(append(b, " shared="...), int64(l.Shared), 10)
	b = append(b, " args="...)
	for i, a := range l.Args {
		if i > 0 {
			b = append(b, ',')
		}
		if a.Access >= 0 {
			b = append(b, "buf"...)
			continue
		}
		b = strconv.AppendInt(b, a.Int, 10)
		b = append(b, '/')
		b = strconv.AppendFloat(b, a.Float, 'g', -1, 64)
	}
	b = append(b, " bytes="...)
	for i, a := range op.Access {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, a.Size, 10)
	}
	return string(b), nil
}

func appendDim(b []byte, d dag.Dim3) []byte {
	b = strconv.AppendInt(b, int64(d.X), 10)
	b = strconv.AppendInt(append(b, 'x'), int64(d.Y), 10)
	return strconv.AppendInt(append(b, 'x'), int64(d.Z), 10)
}

func accessSizes(op *dag.Op) string {
	s := make([]string, len(op.Access))
	for i, a := range op.Access {
		s[i] = strconv.FormatInt(a.Size, 10)
	}
	return strings.Join(s, ",")
}

// copyPath names the path of a copy from src to dst: d2d (one device),
// p2p (two), h2d and d2h with the host side's kind (pinned or pageable),
// and h2h.
func copyPath(src, dst *dag.Buffer) string {
	srcDev, dstDev := src.Placement == dag.Device, dst.Placement == dag.Device
	switch {
	case srcDev && dstDev && src.Device == dst.Device:
		return "d2d"
	case srcDev && dstDev:
		return "p2p"
	case srcDev:
		return "d2h-" + dst.Placement.String()
	case dstDev:
		return "h2d-" + src.Placement.String()
	}
	return "h2h"
}

// PerfModelProblem is why a perf-model file was not used.
type PerfModelProblem int

const (
	PerfModelCorrupt     PerfModelProblem = iota // not a perf model, or one with impossible figures
	PerfModelOtherDevice                         // measured on another device
	PerfModelOldVersion                          // written by an older dagrun
	PerfModelNewVersion                          // written by a newer dagrun
)

// PerfModelError says why a perf-model file was not used. LoadPerfModel
// returns it beside an empty model, so that planning goes on with default
// costs; the caller prints it as a warning.
type PerfModelError struct {
	Path    string
	Problem PerfModelProblem
	Detail  string
	Err     error
}

func (e *PerfModelError) Error() string {
	var what, fix string
	switch e.Problem {
	case PerfModelCorrupt:
		what, fix = "is not a valid perf model", "delete it; the next profiled run writes a new one"
	case PerfModelOtherDevice:
		what, fix = "was measured on another device", "pass a model of this device (one file per device)"
	case PerfModelOldVersion:
		what, fix = "was written by an older dagrun", "delete it; the next profiled run writes a new one"
	case PerfModelNewVersion:
		what, fix = "was written by a newer dagrun", "use that dagrun, or another file"
	}
	s := fmt.Sprintf("perf model %s %s", e.Path, what)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s + "; planning with default costs (" + fix + ")"
}

func (e *PerfModelError) Unwrap() error { return e.Err }

// perfModelFile is the JSON form of a PerfModel.
type perfModelFile struct {
	Format    string          `json:"format"`
	Version   int             `json:"version"`
	Device    DeviceKey       `json:"device"`
	Ops       []opFileEntry   `json:"ops"`
	Overheads []overheadEntry `json:"overheads"`
}

type opFileEntry struct {
	Signature string `json:"signature"`
	opEntry
}

type overheadEntry struct {
	Name Overhead `json:"name"`
	PerfStats
}

// LoadPerfModel reads the perf model at path for device dev. A file that
// does not exist gives an empty model and no error. A corrupt file, one of
// another device or of another version gives an empty model and a
// *PerfModelError to print as a warning: planning falls back to fallback's
// costs (DefaultCost when nil).
func LoadPerfModel(path string, dev DeviceKey, fallback CostModel) (*PerfModel, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewPerfModel(dev, fallback), nil
	}
	if err != nil {
		return NewPerfModel(dev, fallback), &PerfModelError{Path: path, Problem: PerfModelCorrupt, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPerfModelBytes+1))
	if err == nil && len(data) > maxPerfModelBytes {
		err = fmt.Errorf("larger than %d MiB", maxPerfModelBytes>>20)
	}
	if err != nil {
		return NewPerfModel(dev, fallback), &PerfModelError{Path: path, Problem: PerfModelCorrupt, Err: err}
	}
	return parsePerfModel(data, path, dev, fallback)
}

func parsePerfModel(data []byte, path string, dev DeviceKey, fallback CostModel) (*PerfModel, error) {
	fresh := NewPerfModel(dev, fallback)
	fail := func(p PerfModelProblem, detail string, err error) (*PerfModel, error) {
		return fresh, &PerfModelError{Path: path, Problem: p, Detail: detail, Err: err}
	}
	// The header first (json.Unmarshal also refuses anything after the
	// model), so that another version is named as such even where its body
	// would not decode.
	var head struct {
		Format  string    `json:"format"`
		Version int       `json:"version"`
		Device  DeviceKey `json:"device"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fail(PerfModelCorrupt, "", err)
	}
	switch {
	case head.Format != PerfModelFormat:
		return fail(PerfModelCorrupt, fmt.Sprintf("format %q, want %q", head.Format, PerfModelFormat), nil)
	case head.Version < PerfModelVersion:
		return fail(PerfModelOldVersion, fmt.Sprintf("version %d, this dagrun reads %d", head.Version, PerfModelVersion), nil)
	case head.Version > PerfModelVersion:
		return fail(PerfModelNewVersion, fmt.Sprintf("version %d, this dagrun reads %d", head.Version, PerfModelVersion), nil)
	case head.Device != dev:
		return fail(PerfModelOtherDevice, fmt.Sprintf("%s, this is %s", head.Device, dev), nil)
	}
	var file perfModelFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return fail(PerfModelCorrupt, "", err)
	}
	m := NewPerfModel(dev, fallback)
	for i, e := range file.Ops {
		if e.Signature == "" {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d] has no signature", i), nil)
		}
		if _, dup := m.ops[e.Signature]; dup {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d]: signature %q appears twice", i, e.Signature), nil)
		}
		if err := e.check(); err != nil {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d] (%s)", i, e.Signature), err)
		}
		if e.Bytes < 0 {
			return fail(PerfModelCorrupt, fmt.Sprintf("ops[%d] (%s): bytes %d", i, e.Signature, e.Bytes), nil)
		}
		entry := e.opEntry
		m.ops[e.Signature] = &entry
	}
	for i, o := range file.Overheads {
		if o.Name == "" {
			return fail(PerfModelCorrupt, fmt.Sprintf("overheads[%d] has no name", i), nil)
		}
		if _, dup := m.overheads[o.Name]; dup {
			return fail(PerfModelCorrupt, fmt.Sprintf("overheads[%d]: %q appears twice", i, o.Name), nil)
		}
		if err := o.check(); err != nil {
			return fail(PerfModelCorrupt, fmt.Sprintf("overheads[%d] (%s)", i, o.Name), err)
		}
		s := o.PerfStats
		m.overheads[o.Name] = &s
	}
	m.refit()
	return m, nil
}

// MarshalJSON writes the model in its file format, entries sorted so that
// files diff well.
func (m *PerfModel) MarshalJSON() ([]byte, error) {
	file := perfModelFile{Format: PerfModelFormat, Version: PerfModelVersion, Device: m.Device,
		Ops: []opFileEntry{}, Overheads: []overheadEntry{}}
	for sig, e := range m.ops {
		file.Ops = append(file.Ops, opFileEntry{Signature: sig, opEntry: *e})
	}
	slices.SortFunc(file.Ops, func(a, b opFileEntry) int { return cmp.Compare(a.Signature, b.Signature) })
	for name, s := range m.overheads {
		file.Overheads = append(file.Overheads, overheadEntry{Name: name, PerfStats: *s})
	}
	slices.SortFunc(file.Overheads, func(a, b overheadEntry) int { return cmp.Compare(a.Name, b.Name) })
	return json.MarshalIndent(file, "", "  ")
}

// Save writes the model to path atomically: a temporary file in the same
// folder, synced, then renamed over path, so a reader sees the old model or
// the new one, never half of one.
func (m *PerfModel) Save(path string) error {
	data, err := m.MarshalJSON()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("saving perf model: %w", err)
	}
	_, werr := f.Write(append(data, '\n'))
	// CreateTemp makes the file 0600; a model is an output like the others.
	merr := f.Chmod(0o644)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, merr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("saving perf model %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("saving perf model: %w", err)
	}
	return nil
}

// RankPath is the perf-model file of rank in a run of several ranks (one
// file each, since each measures its own device): models.json becomes
// models.rank1.json. A negative rank (no ranks) keeps path.
func RankPath(path string, rank int) string {
	if rank < 0 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.rank%d%s", strings.TrimSuffix(path, ext), rank, ext)
}
